"""Decoding: greedy search and batched beam search through the model's incremental interface.

Shapes: B = sentences, K = beam size, S = source length, T = output length, V = target vocabulary.

Both searches encode the source once, then call `model.decode_step` once per output position for
every unfinished sentence (and every beam) together. A sentence that is finished is removed from
the batch (`select_rows` on the rows still running), so no compute is spent on it afterwards.
They run under `torch.no_grad`, not `torch.inference_mode`: under inference mode, bf16 autocast
does not keep its bf16 copies of the weights and casts every weight again at every step.

The score of a hypothesis y_1 .. y_n (y_n = EOS) is its length-penalised log-probability

    score = sum_{t=1..n} log p(y_t | y_<t, x) / lp(n),    lp(n) = ((5 + n) / 6) ** alpha

(Wu et al. 2016, "GNMT"): n counts the EOS, and the sum includes log p(EOS). With alpha = 0 the
score is the plain log-probability; alpha > 0 favours longer outputs. PAD and BOS are never
produced, and the EOS is forced once a sentence reaches its maximum output length, but the
probabilities themselves are the model's: the score equals what teacher-forced scoring of the
same tokens gives.

Both take an optional `should_stop`, called before each step: when it returns True the search
raises `Stopped` (a server uses it to drop the work of a request nobody waits for any more).
`beam_search` also takes an optional `trace` (seq2seq.decoding.beam_trace), which it fills with
every step's candidates, kept and pruned, for the explorer's beam tree.

Both take `reads`, which says when the host reads the device (the end of this module): the
textbook's `EVERY_STEP` (the default, and what `--plain` decodes with on every device) after
every step, or a GPU's `BatchedReads` once every `check_every` steps; the outputs are the same.

`Hypothesis`, `Stopped` and `gnmt_penalty` live in seq2seq.decoding.line_translator, beside what
CTranslate2's engine shares with this search without importing torch.
"""

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from seq2seq.data.specials import BOS_ID, EOS_ID, PAD_ID
from seq2seq.decoding.beam_trace import BeamTrace
from seq2seq.decoding.line_translator import Hypothesis, check_stop, gnmt_penalty
from seq2seq.decoding.number_guard import NumberGuard
from seq2seq.models.base import Seq2SeqModel, State, select_rows


def max_output_lengths(src_lens: Tensor, ratio: float, const: int) -> Tensor:
    """Maximum number of output tokens (EOS not counted) per sentence: ratio * S_i + const."""
    return (src_lens.float() * ratio).long() + const


def _banned_log_probs(
    log_probs: Tensor,
    history: Tensor,
    at_max_len: Tensor,
    no_repeat_ngram: int,
    max_piece_repeat: int = 0,
) -> Tensor:
    """Mask the next-token log-probabilities of one step with -inf where a token is not allowed.

    log_probs: (R, V) for R decoder rows, modified in place (the step's own output);
    history: (R, t) tokens produced so far (no BOS); at_max_len: (R,) True where the row has
    reached its maximum length and must end now. PAD and BOS are never allowed. With
    no_repeat_ngram = n, a token that would complete an n-gram already present in the row's
    history is banned. With max_piece_repeat = r, a token that would be the same piece r + 1
    times in a row is banned ("m m m m" with r = 3). Only the rows at their maximum length are
    touched for the forced EOS.
    """
    log_probs[:, [PAD_ID, BOS_ID]] = float("-inf")
    _ban_repeated_ngrams(log_probs, history, no_repeat_ngram)
    r = max_piece_repeat
    if r > 0 and history.shape[1] >= r:
        last = history[:, history.shape[1] - r :]  # (R, r)
        repeating = (last == last[:, -1:]).all(dim=1).nonzero().squeeze(1)  # one piece r times
        log_probs[repeating, last[repeating, -1]] = float("-inf")
    ending = at_max_len.nonzero().squeeze(1)
    if len(ending) > 0:
        eos_log_probs = log_probs[ending, EOS_ID]
        log_probs[ending] = float("-inf")
        log_probs[ending, EOS_ID] = eos_log_probs
    return log_probs


def _ban_repeated_ngrams(log_probs: Tensor, history: Tensor, n: int) -> None:
    """Mask (in place) each token of log_probs (R, V) that would complete an n-gram already in
    its row's history (R, t); n = 0: none."""
    if n > 0 and history.shape[1] >= n:
        windows = history.unfold(1, n, 1)  # (R, W, n): every n-gram of the history
        suffix = history[:, history.shape[1] - n + 1 :]  # (R, n - 1): the last n - 1 tokens
        repeats = (windows[:, :, :-1] == suffix[:, None, :]).all(dim=2)  # (R, W)
        counts = torch.zeros_like(log_probs).scatter_add_(1, windows[:, :, -1], repeats.float())
        log_probs.masked_fill_(counts > 0, float("-inf"))


def _mean_heads(attention: Tensor | None) -> Tensor | None:
    """(R, H, S) step attention -> (R, S), averaged over heads."""
    return None if attention is None else attention.float().mean(dim=1)


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
    guard: NumberGuard | None = None,
    reads: "EveryStep | None" = None,
) -> list[Hypothesis]:
    """Pick the most probable next token at every step. The same output as beam_search with K = 1.

    src: (B, S) source ids (each `ids + [EOS]`, PAD-padded); src_lens: (B,);
    max_lens: (B,) maximum output lengths (EOS not counted), e.g. from `max_output_lengths`.
    `reads`: when the host reads the device (None: `EVERY_STEP`).
    Returns one Hypothesis per sentence; its score is defined in the module docstring.
    """
    reads = reads or EVERY_STEP
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
    running = reads.all_running(batch_size, device)  # (R,) those not finished (None: all)
    prev = torch.full((batch_size,), BOS_ID, dtype=torch.long, device=device)
    guard_states = None if guard is None else guard.starts  # (R, 2 + M)
    for step in range(max_steps):
        check_stop(should_stop)
        out = model.decode_step(state, prev, cache, need_attention)
        history, at_max_len = tokens[rows, :step], step >= max_lens[rows]
        log_probs = reads.banned_log_probs(
            out.log_probs, history, at_max_len, no_repeat_ngram, max_piece_repeat
        )
        if guard is not None:
            guard.mask(log_probs, guard_states, at_max_len)
        best_log_probs, prev = log_probs.max(dim=1)
        if guard is not None:
            guard_states = guard.advance(guard_states, prev)
        tokens[rows, step] = prev
        log_prob_sums[rows] += _of_running(best_log_probs, running)
        if need_attention:
            attention[rows, step] = _mean_heads(out.attention)
        finished = _of_running(prev == EOS_ID, running)  # (R,) the rows that end now
        out_lens[rows] = out_lens[rows].where(~finished, step + 1)
        running, keep = reads.rows_to_keep(~finished, running, step)
        if len(keep) == 0:
            break
        if len(keep) < len(rows):
            state = select_rows(state, keep)
            out.cache = select_rows(out.cache, keep)
            rows, prev = rows[keep], prev[keep]
            guard_states = None if guard is None else guard_states[keep]
        cache = out.cache

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


def _of_running(values: Tensor, running: Tensor | None) -> Tensor:
    """`values` (R, ...) in the rows still running, 0 (False) in those finished but not yet out
    of the batch (`BatchedReads`); `running` None: every row of the batch runs."""
    return values if running is None else values.where(running, False)


@dataclass
class _Finished:
    """Hypotheses that ended (chose EOS), on the host, until the final assembly.

    sentences: (F,) sentence numbers; scores: (F,) length-penalised scores;
    tokens: (F, t) outputs without EOS; attention: (F, t + 1, S) or None.
    """

    sentences: Tensor
    scores: Tensor
    tokens: Tensor
    attention: Tensor | None


@dataclass
class _StepEnds:
    """The candidates of one beam step that end with EOS, as the step left them.

    ends: (A, 2K) which candidates end (only the K best count); beams, scores: (A, 2K) the beams
    they extend and their log-probabilities; penalty: the length penalty of their length;
    sentences: (A,) the batch's sentence numbers; beam_tokens: (A, K, t) the beams' outputs;
    attention: (A, K, t + 1, S) or None; running: (A,) the sentences still running
    (`BatchedReads`; None: all of them).
    """

    ends: Tensor
    beams: Tensor
    scores: Tensor
    penalty: float
    sentences: Tensor
    beam_tokens: Tensor
    attention: Tensor | None
    running: Tensor | None = None

    def counts(self) -> Tensor:
        """(A,) how many of each sentence's K best candidates end."""
        return self.ends[:, : self.beam_tokens.shape[1]].sum(dim=1)

    def finished(self) -> _Finished | None:
        """The K best candidates that end, as finished hypotheses scored by log-probability /
        `penalty` (None: none end)."""
        ends = self.ends[:, : self.beam_tokens.shape[1]]
        if self.running is not None:
            ends = ends & self.running[:, None]
        rows, ranks = ends.nonzero(as_tuple=True)
        if len(rows) == 0:
            return None
        ended_beams = self.beams[rows, ranks]
        attention = self.attention
        return _Finished(
            sentences=self.sentences[rows],
            scores=self.scores[rows, ranks] / self.penalty,
            tokens=self.beam_tokens[rows, ended_beams],
            attention=None if attention is None else attention[rows, ended_beams],
        )

    def to_host(self) -> "_StepEnds":
        """The same, its tensors copied to the host's memory."""
        attention, running = self.attention, self.running
        return _StepEnds(
            self.ends.cpu(),
            self.beams.cpu(),
            self.scores.cpu(),
            self.penalty,
            self.sentences.cpu(),
            self.beam_tokens.cpu(),
            None if attention is None else attention.cpu(),
            None if running is None else running.cpu(),
        )


@dataclass
class _BeamBatch:
    """The A sentences in a beam search's batch, and the K beams of each.

    sentences: (A,) their numbers in the input; state: the encoder's output, one row per
    sentence; beam_state: the rows the decoder steps read (one per beam:
    `Seq2SeqModel.beam_state`); cache: the decoder's, one row per beam, K rows per sentence;
    prev: (A * K,) each beam's last token; scores: (A, K) the beams' log-probabilities;
    tokens: (A, K, t) their outputs; attention: (A, K, t, S) their attention rows (t = 0 when
    not needed); guard_states: (A * K,) their number-guard states, or None.
    """

    sentences: Tensor
    state: State
    beam_state: State
    cache: State
    prev: Tensor
    scores: Tensor
    tokens: Tensor
    attention: Tensor
    guard_states: Tensor | None


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
    guard: NumberGuard | None = None,
    reads: "EveryStep | None" = None,
) -> list[list[Hypothesis]]:
    """Beam search over all sentences at once: B * K decoder rows advance together.

    src: (B, S) source ids (each `ids + [EOS]`, PAD-padded); src_lens: (B,);
    max_lens: (B,) maximum output lengths (EOS not counted).

    At each step every beam of a sentence proposes its continuations; the 2K best of the K * V
    (beam, token) pairs are kept. Those of the first K that end with EOS are set aside as
    finished hypotheses; the K best that do not end become the next beams. A sentence leaves
    the batch when it is done (`_running`). Returns per sentence its `nbest` (<= K) best
    finished hypotheses, best first, all distinct. With a `trace` (one sentence only), every
    step's candidates are added to it as well. `reads`: when the host reads the device (None,
    or with a `trace`: `EVERY_STEP`).
    """
    _check_beam_options(nbest, beam_size, trace, src.shape[0])
    reads = EVERY_STEP if reads is None or trace is not None else reads
    batch_size, device, k = src.shape[0], src.device, beam_size
    batch = _first_batch(model, src, src_lens, k, guard)
    running = reads.all_running(batch_size, device)  # (A,) the sentences not done (None: all)
    finished_count = torch.zeros(batch_size, dtype=torch.long, device=device)
    finished: list = []  # what `reads.set_aside` keeps
    history_attention = None

    for step in range(int(max_lens.max()) + 1):
        check_stop(should_stop)
        sentences, num_active = batch.sentences, len(batch.sentences)
        need_step_attention = need_attention or trace is not None
        out = model.decode_step(batch.beam_state, batch.prev, batch.cache, need_step_attention)
        at_max_len = (step >= max_lens[sentences]).repeat_interleave(k)
        history = batch.tokens.reshape(num_active * k, step)
        log_probs = reads.banned_log_probs(
            out.log_probs, history, at_max_len, no_repeat_ngram, max_piece_repeat
        )
        if guard is not None:
            guard.mask(log_probs, batch.guard_states, at_max_len)
        top_scores, top_beams, top_tokens = _top_candidates(model, batch.scores, log_probs)
        ends = (top_tokens == EOS_ID) & top_scores.isfinite()
        if need_attention:  # (A, K, t + 1, S): every beam's attention rows, this step's included
            step_attention = _mean_heads(out.attention).view(num_active, k, 1, -1)
            history_attention = torch.cat([batch.attention, step_attention], dim=2)

        # Set aside the hypotheses that end among the K best candidates.
        penalty = gnmt_penalty(step + 1, length_penalty)
        ended = (ends, top_beams, top_scores, penalty, sentences, batch.tokens, history_attention)
        reads.set_aside(_StepEnds(*ended), running, finished, finished_count)

        # The K best candidates that do not end become the next beams.
        next_scores, keep = top_scores.masked_fill(ends, float("-inf")).topk(k, dim=1)  # (A, K)
        new_beams, new_tokens = top_beams.gather(1, keep), top_tokens.gather(1, keep)
        if trace is not None:  # one sentence: ended_beams (E,) are the beams that ended
            ended_beams = top_beams[:, :k][ends[:, :k]]
            trace.add_step(
                batch.scores, log_probs, out.attention, new_beams, new_tokens, ended_beams, penalty
            )

        below_max = step < max_lens[sentences]
        still = _running(finished_count[sentences], ends[:, 0], below_max, k, nbest, stop_early)
        running, kept = reads.rows_to_keep(still, running, step)  # (A',) the sentences that stay
        if len(kept) == 0:
            break
        beams = (new_beams[kept], new_tokens[kept], next_scores[kept])
        batch = _next_batch(model, batch, kept, *beams, out.cache, history_attention, guard)

    return reads.nbest_lists(finished, batch_size, nbest, src_lens)


def _check_beam_options(nbest: int, beam_size: int, trace: BeamTrace | None, batch: int) -> None:
    """ValueError unless 1 <= nbest <= beam_size, and a trace has one sentence to record."""
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest must be in [1, beam_size={beam_size}], got {nbest}")
    if trace is not None and batch != 1:
        raise ValueError(f"a trace records one sentence, got {batch}")


def _first_batch(
    model: Seq2SeqModel, src: Tensor, src_lens: Tensor, k: int, guard: NumberGuard | None
) -> _BeamBatch:
    """The batch before the first step: every sentence, encoded, with K beams of which only
    the first is live (the others score -inf), so the first step expands one beam into K
    distinct ones."""
    batch_size, device = src.shape[0], src.device
    state = model.encode(src, src_lens)
    beam_rows = torch.arange(batch_size, device=device).repeat_interleave(k)
    cache = select_rows(model.init_cache(state), beam_rows)
    beam_state = model.beam_state(state, k)
    sentences = torch.arange(batch_size, device=device)
    scores = torch.full((batch_size, k), float("-inf"), device=device)
    scores[:, 0] = 0.0
    tokens = torch.zeros(batch_size, k, 0, dtype=torch.long, device=device)
    attention = torch.zeros(batch_size, k, 0, src.shape[1], device=device)
    prev = torch.full((batch_size * k,), BOS_ID, dtype=torch.long, device=device)
    guard_states = None if guard is None else guard.starts.repeat_interleave(k, dim=0)
    return _BeamBatch(
        sentences, state, beam_state, cache, prev, scores, tokens, attention, guard_states
    )


def _next_batch(
    model: Seq2SeqModel,
    batch: _BeamBatch,
    kept: Tensor,
    beams: Tensor,
    tokens: Tensor,
    scores: Tensor,
    cache: State,
    history_attention: Tensor | None,
    guard: NumberGuard | None,
) -> _BeamBatch:
    """The batch of the next step: the sentences `kept` (A',) of `batch`, each with its K new
    beams, which extend its beams `beams` (A', K) with `tokens` (A', K) and score `scores`
    (A', K). cache: the step's decoder cache, one row per beam of `batch`; history_attention:
    (A, K, t + 1, S) the attention rows of `batch`'s beams and this step, or None."""
    k = beams.shape[1]
    sentence_rows = kept.view(-1, 1)  # each kept sentence's K beams, as (A', K) indices
    beam_tokens = torch.cat([batch.tokens[sentence_rows, beams], tokens[..., None]], 2)
    guard_states = None
    if guard is not None:
        states = batch.guard_states.view(len(batch.sentences), k, -1)[sentence_rows, beams]
        guard_states = guard.advance(states.flatten(0, 1), tokens.view(-1))
    attention = batch.attention
    if history_attention is not None:
        attention = history_attention[sentence_rows, beams]
    cache = select_rows(cache, (sentence_rows * k + beams).view(-1))  # (A' * K,)
    state, beam_state, sentences = batch.state, batch.beam_state, batch.sentences
    if len(kept) < len(sentences):
        state = select_rows(state, kept)
        beam_state = model.beam_state(state, k)
        sentences = sentences[kept]
    prev = tokens.view(-1)
    return _BeamBatch(
        sentences, state, beam_state, cache, prev, scores, beam_tokens, attention, guard_states
    )


def _top_candidates(
    model: Seq2SeqModel, beam_scores: Tensor, log_probs: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """The 2K best (beam, token) continuations of each sentence's K beams: their scores, beams
    and tokens, each (A, 2K), best first (`Seq2SeqModel.best_candidates`: the top-k of the sum
    of each beam's score and its next-token log-probabilities)."""
    k, vocab_size = beam_scores.shape[1], log_probs.shape[1]
    scores, index = model.best_candidates(beam_scores, log_probs, min(2 * k, k * vocab_size))
    return scores, index // vocab_size, index % vocab_size


def _running(
    ended_count: Tensor, best_ends: Tensor, below_max: Tensor, k: int, nbest: int, stop_early: bool
) -> Tensor:
    """Which sentences still run after a step: (A,), True where one does.

    A sentence is done once it has K finished hypotheses (fairseq's rule), or with `stop_early`
    as soon as its most probable candidate ends (`best_ends`) and it has `nbest` finished ones
    (OpenNMT-py's and Joey NMT's rule), or at its maximum length. All candidates of a step have
    the same length, so the most probable is also the best by length-penalised score, but a
    longer hypothesis found later could still score higher: `stop_early` trades that chance
    for fewer steps.
    """
    done = ended_count >= k
    if stop_early:
        done |= best_ends & (ended_count >= nbest)
    return ~done & below_max


def _nbest_lists(
    finished: list[_Finished], batch_size: int, nbest: int, src_lens: Tensor
) -> list[list[Hypothesis]]:
    """Group the finished hypotheses by sentence and keep each sentence's `nbest` best."""
    pools: list[list[Hypothesis]] = [[] for _ in range(batch_size)]
    for group in finished:
        scores = group.scores.tolist()
        for i, sentence in enumerate(group.sentences.tolist()):
            attention = None
            if group.attention is not None:
                attention = group.attention[i, :, : src_lens[sentence]].cpu()
            pools[sentence].append(Hypothesis(group.tokens[i].tolist(), scores[i], attention))
    return [sorted(pool, key=lambda h: -h.score)[:nbest] for pool in pools]


# ---------------------------------------------------------------------------------------------
# When the host reads the device
# ---------------------------------------------------------------------------------------------

CHECK_EVERY = 8  # a GPU's decoding steps between the host's reads of which sentences still run


class EveryStep:
    """The textbook's reads of the device, after every step: the sentences that are done leave
    the batch at once (`rows_to_keep`), the hypotheses that end are sorted out at once
    (`set_aside`), and the rows whose tokens are banned are found with `nonzero`
    (`_banned_log_probs`). Each read is free on a CPU, and each sentence that leaves saves its
    compute: every CPU decodes so, and `--plain` (model.fast false) on every device."""

    def all_running(self, rows: int, device: torch.device) -> Tensor | None:
        """The mask of the batch's rows still running at the start; None: the batch holds only
        rows that run."""
        return None

    def banned_log_probs(
        self,
        log_probs: Tensor,
        history: Tensor,
        at_max_len: Tensor,
        no_repeat_ngram: int,
        max_piece_repeat: int,
    ) -> Tensor:
        """The step's log-probabilities, the tokens not allowed at -inf (`_banned_log_probs`)."""
        return _banned_log_probs(log_probs, history, at_max_len, no_repeat_ngram, max_piece_repeat)

    def rows_to_keep(
        self, still: Tensor, running: Tensor | None, step: int
    ) -> tuple[Tensor | None, Tensor]:
        """After step `step`, with `still` (A,) True where a row still runs: the mask of the
        running rows among those kept, and the rows to keep in the batch (A',) (none: the search
        is over)."""
        return running, still.nonzero().squeeze(1)

    def set_aside(
        self, ends: _StepEnds, running: Tensor | None, finished: list, counts: Tensor
    ) -> None:
        """Add the hypotheses that end to `finished` and their number to each sentence's
        `counts` (B,)."""
        if (ended := ends.finished()) is not None:
            finished.append(ended)
            counts[ends.sentences] += ends.counts()

    def nbest_lists(
        self, finished: list, batch_size: int, nbest: int, src_lens: Tensor
    ) -> list[list[Hypothesis]]:
        """The `nbest` best of each sentence's hypotheses in `finished` (`_nbest_lists`)."""
        return _nbest_lists(finished, batch_size, nbest, src_lens)


EVERY_STEP = EveryStep()


@dataclass(frozen=True)
class BatchedReads(EveryStep):
    """A GPU's reads of the device: once every `check_every` steps, instead of several times a
    step. The same outputs as `EVERY_STEP`.

    A GPU runs behind the host. Each read of a device tensor (the size of a `nonzero`, a `bool`
    of a tensor) makes the host wait until the GPU has caught up, and the GPU then idles while
    the host prepares the next step. Here

    - a row that is done stays in the batch, masked (`running`), until the next check, every
      `check_every` steps: one `nonzero` then removes the rows that are done, or ends the search;
    - each step's ending candidates stay on the device as that step's dense tensors
      (`_StepEnds`), sorted out on the host once the search is over;
    - the banned tokens are masked over the whole step (`_banned_on_device`).

    The rows that are done cost some compute until the next check; on a GPU that costs less
    than the waits. With check_every = 1 the rows of each step are those of `EVERY_STEP`."""

    check_every: int = CHECK_EVERY

    def all_running(self, rows: int, device: torch.device) -> Tensor | None:
        return torch.ones(rows, dtype=torch.bool, device=device)

    def banned_log_probs(
        self,
        log_probs: Tensor,
        history: Tensor,
        at_max_len: Tensor,
        no_repeat_ngram: int,
        max_piece_repeat: int,
    ) -> Tensor:
        return _banned_on_device(log_probs, history, at_max_len, no_repeat_ngram, max_piece_repeat)

    def rows_to_keep(
        self, still: Tensor, running: Tensor | None, step: int
    ) -> tuple[Tensor | None, Tensor]:
        assert running is not None  # from `all_running`
        running = running & still
        if (step + 1) % self.check_every != 0:
            return running, torch.arange(len(running), device=running.device)  # every row
        keep = running.nonzero().squeeze(1)  # the host's one read
        return running[keep], keep

    def set_aside(
        self, ends: _StepEnds, running: Tensor | None, finished: list, counts: Tensor
    ) -> None:
        finished.append(replace(ends, running=running))  # sorted out by `nbest_lists`
        counts[ends.sentences] += ends.counts()

    def nbest_lists(
        self, finished: list, batch_size: int, nbest: int, src_lens: Tensor
    ) -> list[list[Hypothesis]]:
        on_host = [ended for ends in finished if (ended := ends.to_host().finished()) is not None]
        return _nbest_lists(on_host, batch_size, nbest, src_lens.cpu())


def _banned_on_device(
    log_probs: Tensor,
    history: Tensor,
    at_max_len: Tensor,
    no_repeat_ngram: int,
    max_piece_repeat: int = 0,
) -> Tensor:
    """`_banned_log_probs` without reading the device or copying to it: the same -inf entries in
    log_probs (R, V), the repeated piece banned by a scatter and the rows at their maximum
    length masked whole (a pass over (R, V) that a GPU does not notice, but a CPU does).
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
