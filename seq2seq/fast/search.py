"""Greedy and beam search for a GPU: the outputs of `seq2seq.decoding.search`, with the host
reading the device once every `check_every` steps instead of several times a step.

A GPU runs behind the host. Each read of a device tensor (the size of a `nonzero`, a `bool` of
a tensor) makes the host wait until the GPU has caught up, and the GPU then idles while the host
prepares the next step. The textbook searches read after every step: which sentences finished
(to remove them from the batch) and which hypotheses ended (to set them aside). Here

- a finished sentence stays in the batch, masked (`running`), until the next check, every
  `check_every` steps: one `nonzero` then removes the finished ones, or ends the search;
- each step's ended hypotheses stay on the device as that step's dense tensors (`_StepRecord`),
  sorted out on the host once the search is over;
- the banned tokens are masked over the whole step (`_banned_log_probs`), where the textbook
  finds the rows to change with `nonzero`.

The finished sentences' rows cost some compute until the next check; on a GPU that costs less
than the waits (a CPU has no waits, and decodes with the textbook searches: `searches_for`).
With check_every = 1 the steps are those of the textbook searches, row for row.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from seq2seq.data.specials import BOS_ID, EOS_ID, PAD_ID
from seq2seq.decoding import search
from seq2seq.decoding.beam_trace import BeamTrace
from seq2seq.decoding.number_guard import NumberGuard
from seq2seq.decoding.search import (
    _ban_repeated_ngrams,
    _Finished,
    _first_beams,
    _mean_heads,
    _nbest_lists,
    _running,
    _top_candidates,
)
from seq2seq.decoding.translation import Hypothesis, check_stop, gnmt_penalty
from seq2seq.models.base import Seq2SeqModel, select_rows

CHECK_EVERY = 8  # decoding steps between the host's reads of which sentences still run


def _banned_log_probs(
    log_probs: Tensor,
    history: Tensor,
    at_max_len: Tensor,
    no_repeat_ngram: int,
    max_piece_repeat: int = 0,
) -> Tensor:
    """`seq2seq.decoding.search._banned_log_probs` without reading the device or copying to
    it: the same -inf entries in log_probs (R, V), the repeated piece banned by a scatter and
    the rows at their maximum length masked whole (a pass over (R, V) that a GPU does not
    notice, but a CPU does).
    """
    log_probs[:, PAD_ID].fill_(float("-inf"))  # views filled: an index by a list, or a value
    log_probs[:, BOS_ID].fill_(float("-inf"))  # assigned, is a tensor made on the host
    _ban_repeated_ngrams(log_probs, history, no_repeat_ngram)
    r = max_piece_repeat
    if r > 0 and history.shape[1] >= r:
        last = history[:, history.shape[1] - r :]  # (R, r)
        repeating = (last == last[:, -1:]).all(dim=1, keepdim=True)  # (R, 1): one piece r times
        piece_log_probs = log_probs.gather(1, last[:, -1:]).masked_fill(repeating, float("-inf"))
        log_probs.scatter_(1, last[:, -1:], piece_log_probs)
    eos_log_probs = log_probs[:, EOS_ID].clone()
    log_probs.masked_fill_(at_max_len[:, None], float("-inf"))
    log_probs[:, EOS_ID] = eos_log_probs
    return log_probs


@torch.no_grad()
def greedy_search(
    model: Seq2SeqModel,
    src: Tensor,
    src_lens: Tensor,
    max_lens: Tensor,
    need_attention: bool = False,
    length_penalty: float = 1.0,
    no_repeat_ngram: int = 0,
    max_piece_repeat: int = 0,
    should_stop: Callable[[], bool] | None = None,
    check_every: int = CHECK_EVERY,
    guard: NumberGuard | None = None,
) -> list[Hypothesis]:
    """`seq2seq.decoding.search.greedy_search`, reading the device every `check_every` steps.

    src: (B, S); src_lens, max_lens: (B,). The R rows of a step are the sentences that were
    running at the last check; `running` (R,) marks those that still are.
    """
    batch_size, device = src.shape[0], src.device
    max_steps = int(max_lens.max()) + 1
    tokens = torch.full((batch_size, max_steps), PAD_ID, dtype=torch.long, device=device)
    log_prob_sums = torch.zeros(batch_size, device=device)
    out_lens = torch.zeros(batch_size, dtype=torch.long, device=device)
    if need_attention:
        attention = torch.zeros(batch_size, max_steps, src.shape[1], device=device)

    state = model.encode(src, src_lens)
    cache = model.init_cache(state)
    rows = torch.arange(batch_size, device=device)  # (R,) the sentences in the batch
    running = torch.ones(batch_size, dtype=torch.bool, device=device)  # (R,)
    prev = torch.full((batch_size,), BOS_ID, dtype=torch.long, device=device)
    guard_states = None if guard is None else guard.roots  # (R,)
    for step in range(max_steps):
        check_stop(should_stop)
        out = model.decode_step(state, prev, cache, need_attention)
        history, at_max_len = tokens[rows, :step], step >= max_lens[rows]
        log_probs = _banned_log_probs(
            out.log_probs, history, at_max_len, no_repeat_ngram, max_piece_repeat
        )
        if guard is not None:
            guard.mask(log_probs, guard_states, at_max_len)
        best_log_probs, prev = log_probs.max(dim=1)
        if guard is not None:
            guard_states = guard.advance(guard_states, prev)
        tokens[rows, step] = prev.where(running, PAD_ID)
        log_prob_sums[rows] += best_log_probs.where(running, 0.0)
        if need_attention:
            attention[rows, step] = _mean_heads(out.attention) * running[:, None]
        finished = running & (prev == EOS_ID)
        out_lens[rows] = out_lens[rows].where(~finished, step + 1)
        running = running & ~finished
        cache = out.cache
        if (step + 1) % check_every == 0:
            keep = running.nonzero().squeeze(1)  # the host's one read
            if len(keep) == 0:
                break
            if len(keep) < len(rows):
                state, cache = select_rows(state, keep), select_rows(cache, keep)
                rows, prev, running = rows[keep], prev[keep], running[keep]
                guard_states = None if guard is None else guard_states[keep]

    scores = (log_prob_sums / gnmt_penalty(out_lens, length_penalty)).tolist()
    tokens, lengths, src_lengths = tokens.cpu(), out_lens.tolist(), src_lens.tolist()
    if need_attention:
        attention = attention.cpu()
    return [
        Hypothesis(
            tokens=tokens[i, : lengths[i] - 1].tolist(),
            score=scores[i],
            attention=attention[i, : lengths[i], : src_lengths[i]] if need_attention else None,
        )
        for i in range(batch_size)
    ]


@dataclass
class _StepRecord:
    """What one beam step leaves for the final assembly, all on the device.

    ends: (A, K) which of the K best candidates ended; scores: (A, K) their length-penalised
    scores; beams: (A, K) the beams they extend; sentences: (A,) the batch's sentence numbers;
    beam_tokens: (A, K, t) the beams' outputs; attention: (A, K, t + 1, S) or None.
    """

    ends: Tensor
    scores: Tensor
    beams: Tensor
    sentences: Tensor
    beam_tokens: Tensor
    attention: Tensor | None

    def finished(self) -> _Finished | None:
        """The hypotheses that ended, read to the host (None: none did)."""
        rows, ranks = self.ends.cpu().nonzero(as_tuple=True)
        if len(rows) == 0:
            return None
        ended_beams = self.beams.cpu()[rows, ranks]
        attention = self.attention
        return _Finished(
            sentences=self.sentences.cpu()[rows],
            scores=self.scores.cpu()[rows, ranks],
            tokens=self.beam_tokens.cpu()[rows, ended_beams],
            attention=None if attention is None else attention.cpu()[rows, ended_beams],
        )


@torch.no_grad()
def beam_search(
    model: Seq2SeqModel,
    src: Tensor,
    src_lens: Tensor,
    beam_size: int,
    max_lens: Tensor,
    length_penalty: float = 1.0,
    nbest: int = 1,
    no_repeat_ngram: int = 0,
    need_attention: bool = False,
    stop_early: bool = False,
    max_piece_repeat: int = 0,
    should_stop: Callable[[], bool] | None = None,
    trace: BeamTrace | None = None,
    check_every: int = CHECK_EVERY,
    guard: NumberGuard | None = None,
) -> list[list[Hypothesis]]:
    """`seq2seq.decoding.search.beam_search`, reading the device every `check_every` steps
    (every step with a `trace`, which records the steps of a running sentence only).

    src: (B, S); src_lens, max_lens: (B,). The A sentences of a step are those running at the
    last check; `running` (A,) marks those that still are, and only their candidates end.
    """
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest must be in [1, beam_size={beam_size}], got {nbest}")
    if trace is not None and src.shape[0] != 1:
        raise ValueError(f"a trace records one sentence, got {src.shape[0]}")
    batch_size, device, k = src.shape[0], src.device, beam_size
    check_every = 1 if trace is not None else check_every

    state = model.encode(src, src_lens)
    beam_rows = torch.arange(batch_size, device=device).repeat_interleave(k)
    cache = select_rows(model.init_cache(state), beam_rows)
    beam_state = model.beam_state(state, k)
    sentences = torch.arange(batch_size, device=device)  # (A,)
    running = torch.ones(batch_size, dtype=torch.bool, device=device)  # (A,)
    beam_scores, beam_tokens, beam_attention = _first_beams(batch_size, k, src.shape[1], device)
    prev = torch.full((batch_size * k,), BOS_ID, dtype=torch.long, device=device)
    finished_count = torch.zeros(batch_size, dtype=torch.long, device=device)
    records: list[_StepRecord] = []
    history_attention = None
    guard_states = None if guard is None else guard.roots.repeat_interleave(k)  # (A * K,)

    for step in range(int(max_lens.max()) + 1):
        check_stop(should_stop)
        num_active = len(sentences)
        out = model.decode_step(beam_state, prev, cache, need_attention or trace is not None)
        at_max_len = (step >= max_lens[sentences]).repeat_interleave(k)
        history = beam_tokens.reshape(num_active * k, step)
        log_probs = _banned_log_probs(
            out.log_probs, history, at_max_len, no_repeat_ngram, max_piece_repeat
        )
        if guard is not None:
            guard.mask(log_probs, guard_states, at_max_len)
        top_scores, top_beams, top_tokens = _top_candidates(model, beam_scores, log_probs)
        ends = (top_tokens == EOS_ID) & top_scores.isfinite() & running[:, None]
        if need_attention:  # (A, K, t + 1, S)
            step_attention = _mean_heads(out.attention).view(num_active, k, 1, -1)
            history_attention = torch.cat([beam_attention, step_attention], dim=2)

        penalty = gnmt_penalty(step + 1, length_penalty)
        records.append(
            _StepRecord(
                ends[:, :k],
                top_scores[:, :k] / penalty,
                top_beams[:, :k],
                sentences,
                beam_tokens,
                history_attention,
            )
        )
        finished_count[sentences] += ends[:, :k].sum(dim=1)

        next_scores, keep = top_scores.masked_fill(ends, float("-inf")).topk(k, dim=1)  # (A, K)
        new_beams, new_tokens = top_beams.gather(1, keep), top_tokens.gather(1, keep)
        if trace is not None:
            ended_beams = top_beams[:, :k][ends[:, :k]]
            trace.add_step(
                beam_scores, log_probs, out.attention, new_beams, new_tokens, ended_beams, penalty
            )

        below_max = step < max_lens[sentences]
        running &= _running(finished_count[sentences], ends[:, 0], below_max, k, nbest, stop_early)
        beam_scores = next_scores
        sentence_rows = torch.arange(num_active, device=device).view(-1, 1)
        beam_tokens = torch.cat([beam_tokens[sentence_rows, new_beams], new_tokens[..., None]], 2)
        if guard is not None:
            kept = guard_states.view(num_active, k)[sentence_rows, new_beams]
            guard_states = guard.advance(kept.view(-1), new_tokens.view(-1))
        if need_attention:
            beam_attention = history_attention[sentence_rows, new_beams]
        cache = select_rows(out.cache, (sentence_rows * k + new_beams).view(-1))  # (A * K,)
        prev = new_tokens.view(-1)
        if (step + 1) % check_every == 0:
            still = running.nonzero().squeeze(1)  # the host's one read
            if len(still) == 0:
                break
            if len(still) < num_active:
                beam_rows = (still.view(-1, 1) * k + torch.arange(k, device=device)).view(-1)
                cache, prev = select_rows(cache, beam_rows), prev[beam_rows]
                guard_states = None if guard is None else guard_states[beam_rows]
                beam_scores, beam_tokens = beam_scores[still], beam_tokens[still]
                if need_attention:
                    beam_attention = beam_attention[still]
                state = select_rows(state, still)
                beam_state = model.beam_state(state, k)
                sentences, running = sentences[still], running[still]

    finished = [ended for record in records if (ended := record.finished()) is not None]
    return _nbest_lists(finished, batch_size, nbest, src_lens.cpu())


Greedy = Callable[..., list[Hypothesis]]
Beam = Callable[..., list[list[Hypothesis]]]


def searches_for(device: torch.device) -> tuple[Greedy, Beam]:
    """The greedy and beam search that decode on `device`: the textbook ones on a CPU, where
    removing each finished sentence at once saves compute and reading the device costs
    nothing; those of this module on a GPU, where the host's reads make the GPU wait."""
    if device.type == "cpu":
        return search.greedy_search, search.beam_search
    return greedy_search, beam_search
