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
`Hypothesis`, `Stopped` and `gnmt_penalty` live in seq2seq.decoding.translation, beside what
CTranslate2's engine shares with this search without importing torch.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from seq2seq.data.specials import BOS_ID, EOS_ID, PAD_ID
from seq2seq.decoding.beam_trace import BeamTrace
from seq2seq.decoding.number_guard import NumberGuard
from seq2seq.decoding.translation import Hypothesis, check_stop, gnmt_penalty
from seq2seq.models.base import Seq2SeqModel, select_rows


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
) -> list[Hypothesis]:
    """Pick the most probable next token at every step. The same output as beam_search with K = 1.

    src: (B, S) source ids (each `ids + [EOS]`, PAD-padded); src_lens: (B,);
    max_lens: (B,) maximum output lengths (EOS not counted), e.g. from `max_output_lengths`.
    Returns one Hypothesis per sentence; its score is defined in the module docstring.
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
    rows = torch.arange(batch_size, device=device)  # the sentences still running
    prev = torch.full((batch_size,), BOS_ID, dtype=torch.long, device=device)
    guard_states = None if guard is None else guard.roots  # (B,) for the rows still running
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
        tokens[rows, step] = prev
        log_prob_sums[rows] += best_log_probs
        if need_attention:
            attention[rows, step] = _mean_heads(out.attention)
        finished = prev == EOS_ID
        out_lens[rows[finished]] = step + 1
        if finished.all():
            break
        running = (~finished).nonzero().squeeze(1)
        if len(running) < len(rows):
            state = select_rows(state, running)
            out.cache = select_rows(out.cache, running)
            rows, prev = rows[running], prev[running]
            guard_states = None if guard is None else guard_states[running]
        cache = out.cache

    scores = log_prob_sums / gnmt_penalty(out_lens, length_penalty)
    return [
        Hypothesis(
            tokens=tokens[i, : out_lens[i] - 1].tolist(),
            score=float(scores[i]),
            attention=attention[i, : out_lens[i], : src_lens[i]].cpu() if need_attention else None,
        )
        for i in range(batch_size)
    ]


@dataclass
class _Finished:
    """Hypotheses that ended (chose EOS) at one step, kept as tensors until the final assembly.

    sentences: (F,) sentence numbers; scores: (F,) length-penalised scores;
    tokens: (F, t) outputs without EOS; attention: (F, t + 1, S) or None.
    """

    sentences: Tensor
    scores: Tensor
    tokens: Tensor
    attention: Tensor | None


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
) -> list[list[Hypothesis]]:
    """Beam search over all sentences at once: B * K decoder rows advance together.

    src: (B, S) source ids (each `ids + [EOS]`, PAD-padded); src_lens: (B,);
    max_lens: (B,) maximum output lengths (EOS not counted).

    At each step every beam of a sentence proposes its continuations; the 2K best of the K * V
    (beam, token) pairs are kept. Those of the first K that end with EOS are set aside as
    finished hypotheses; the K best that do not end become the next beams. A sentence leaves
    the batch when it is done (`_running`).

    Returns per sentence its `nbest` (<= K) best finished hypotheses, best first, all distinct.
    With a `trace` (one sentence only), every step's candidates are added to it as well.
    """
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest must be in [1, beam_size={beam_size}], got {nbest}")
    if trace is not None and src.shape[0] != 1:
        raise ValueError(f"a trace records one sentence, got {src.shape[0]}")
    batch_size, device, k = src.shape[0], src.device, beam_size

    # The cache has one row per beam: K rows per sentence. `state` keeps one row per sentence,
    # `beam_state` the rows the decoder steps read (one per beam: `Seq2SeqModel.beam_state`).
    state = model.encode(src, src_lens)
    beam_rows = torch.arange(batch_size, device=device).repeat_interleave(k)
    cache = select_rows(model.init_cache(state), beam_rows)
    beam_state = model.beam_state(state, k)
    sentences = torch.arange(batch_size, device=device)  # (A,) the A sentences still running
    beam_scores, beam_tokens, beam_attention = _first_beams(batch_size, k, src.shape[1], device)
    prev = torch.full((batch_size * k,), BOS_ID, dtype=torch.long, device=device)
    finished_count = torch.zeros(batch_size, dtype=torch.long, device=device)
    finished: list[_Finished] = []
    history_attention = None
    guard_states = None if guard is None else guard.roots.repeat_interleave(k)  # (B * K,)

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
        ends = (top_tokens == EOS_ID) & top_scores.isfinite()
        if need_attention:  # (A, K, t + 1, S): every beam's attention rows, this step's included
            step_attention = _mean_heads(out.attention).view(num_active, k, 1, -1)
            history_attention = torch.cat([beam_attention, step_attention], dim=2)

        # Set aside the hypotheses that end among the K best candidates.
        penalty = gnmt_penalty(step + 1, length_penalty)
        top_k = (ends[:, :k], top_beams, top_scores, penalty)
        if (ended := _ended(*top_k, sentences, beam_tokens, history_attention)) is not None:
            finished.append(ended)
            finished_count[sentences] += ends[:, :k].sum(dim=1)

        # The K best candidates that do not end become the next beams.
        next_scores, keep = top_scores.masked_fill(ends, float("-inf")).topk(k, dim=1)  # (A, K)
        new_beams, new_tokens = top_beams.gather(1, keep), top_tokens.gather(1, keep)
        if trace is not None:  # one sentence: ended_beams (E,) are the beams that ended
            ended_beams = top_beams[:, :k][ends[:, :k]]
            trace.add_step(
                beam_scores, log_probs, out.attention, new_beams, new_tokens, ended_beams, penalty
            )

        below_max = step < max_lens[sentences]
        still = _running(finished_count[sentences], ends[:, 0], below_max, k, nbest, stop_early)
        running = still.nonzero().squeeze(1)  # (A',) the sentences that stay in the batch
        if len(running) == 0:
            break
        new_beams, new_tokens = new_beams[running], new_tokens[running]
        beam_scores = next_scores[running]
        sentence_rows = running.view(-1, 1)  # each running sentence's K beams, as (A', K) indices
        beam_tokens = torch.cat([beam_tokens[sentence_rows, new_beams], new_tokens[..., None]], 2)
        if guard is not None:
            kept = guard_states.view(num_active, k)[sentence_rows, new_beams]
            guard_states = guard.advance(kept.view(-1), new_tokens.view(-1))
        if need_attention:
            beam_attention = history_attention[sentence_rows, new_beams]
        cache = select_rows(out.cache, (sentence_rows * k + new_beams).view(-1))  # (A' * K,)
        if len(running) < num_active:
            state = select_rows(state, running)
            beam_state = model.beam_state(state, k)
            sentences = sentences[running]
        prev = new_tokens.view(-1)

    return _nbest_lists(finished, batch_size, nbest, src_lens)


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


def _first_beams(
    batch_size: int, k: int, src_len: int, device: torch.device
) -> tuple[Tensor, Tensor, Tensor]:
    """The beams before the first step: scores (B, K), tokens (B, K, 0), attention (B, K, 0, S).
    Only the first beam is live (the others score -inf), so the first step expands one beam
    into K distinct ones."""
    scores = torch.full((batch_size, k), float("-inf"), device=device)
    scores[:, 0] = 0.0
    tokens = torch.zeros(batch_size, k, 0, dtype=torch.long, device=device)
    return scores, tokens, torch.zeros(batch_size, k, 0, src_len, device=device)


def _ended(
    ends: Tensor,
    top_beams: Tensor,
    top_scores: Tensor,
    penalty: float,
    sentences: Tensor,
    beam_tokens: Tensor,
    history_attention: Tensor | None,
) -> _Finished | None:
    """The candidates among the K best that end with EOS, as finished hypotheses (None: none),
    scored by log-probability / `penalty` (the length penalty of their length).

    ends: (A, K) which of the K best candidates end; top_beams, top_scores: (A, >=K) their beams
    and log-probabilities; beam_tokens: (A, K, t); history_attention: (A, K, t + 1, S).
    """
    rows, ranks = ends.nonzero(as_tuple=True)
    if len(rows) == 0:
        return None
    ended_beams = top_beams[rows, ranks]
    return _Finished(
        sentences=sentences[rows],
        scores=top_scores[rows, ranks] / penalty,
        tokens=beam_tokens[rows, ended_beams],
        attention=None if history_attention is None else history_attention[rows, ended_beams],
    )


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
