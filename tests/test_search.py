"""Greedy and beam search on both model families: exactness against teacher-forced scoring,
batching, removal of finished sentences, n-gram bans, and a tiny model that learns to reverse."""

import itertools

import pytest
import sacrebleu
import torch
import torch.nn.functional as F
from tiny import tiny_model

from seq2seq.data.specials import BOS_ID, EOS_ID, PAD_ID
from seq2seq.decoding.attention_maps import shown_cross_attention
from seq2seq.decoding.line_translator import gnmt_penalty
from seq2seq.decoding.quantize import quantized_copy
from seq2seq.decoding.search import (
    _banned_log_probs,
    beam_search,
    greedy_search,
    max_output_lengths,
)
from seq2seq.models.base import Seq2SeqModel

VOCAB = 16  # 4 specials and 12 symbols
# The tiny models (tests/tiny.py), without dropout; the GRU wider, with separate embeddings.
CHANGES = {
    "transformer": dict(encoder_layers=1, decoder_layers=2, dropout=0.0, attention_dropout=0.0),
    "gru": dict(
        embed_dim=32,
        hidden_size=64,
        encoder_layers=1,
        decoder_layers=1,
        dropout=0.0,
        share_embeddings=False,
        tie_output=False,
    ),
}
TRAIN_STEPS = {"transformer": 300, "gru": 150}
ARCHS = list(CHANGES)


def reversal_batch(
    size: int, generator: torch.Generator, min_len: int = 2, max_len: int = 8
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random symbol sequences and their reversals: src (B, S) with EOS, src_lens (B,) and
    target (B, S + 1) = BOS + reversed symbols + EOS, PAD-padded."""
    lens = torch.randint(min_len, max_len + 1, (size,), generator=generator)
    longest = int(lens.max())
    src = torch.full((size, longest + 1), PAD_ID)
    tgt = torch.full((size, longest + 2), PAD_ID)
    for row, length in enumerate(lens.tolist()):
        symbols = torch.randint(4, VOCAB, (length,), generator=generator)
        src[row, : length + 1] = torch.cat([symbols, torch.tensor([EOS_ID])])
        tgt[row, : length + 2] = torch.cat(
            [torch.tensor([BOS_ID]), symbols.flip(0), torch.tensor([EOS_ID])]
        )
    return src, lens + 1, tgt


def new_model(arch: str, fast: bool = True) -> Seq2SeqModel:
    return tiny_model(arch, VOCAB, fast, **CHANGES[arch]).eval()


@pytest.fixture(scope="module")
def trained() -> dict[str, Seq2SeqModel]:
    """Each model family trained for a few hundred Adam steps to reverse symbol sequences."""
    models = {}
    for arch in ARCHS:
        model = new_model(arch).train()
        optimizer = torch.optim.Adam(model.parameters())
        schedule = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=1e-2, total_steps=TRAIN_STEPS[arch]
        )
        generator = torch.Generator().manual_seed(0)
        for _ in range(TRAIN_STEPS[arch]):
            src, src_lens, tgt = reversal_batch(64, generator)
            logits = model(src, src_lens, tgt[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=PAD_ID)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
        models[arch] = model.eval()
    return models


def held_out(size: int = 24, seed: int = 123) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return reversal_batch(size, torch.Generator().manual_seed(seed))


def teacher_forced_score(
    model: Seq2SeqModel, src: torch.Tensor, src_len: int, tokens: list[int], alpha: float
) -> float:
    """The length-penalised log-probability of `tokens` + EOS, scored in one forward pass."""
    tgt_in = torch.tensor([[BOS_ID, *tokens]])
    with torch.no_grad():
        log_probs = F.log_softmax(model(src[None, :src_len], torch.tensor([src_len]), tgt_in), -1)
    gold = torch.tensor([*tokens, EOS_ID])
    total = log_probs[0].gather(1, gold[:, None]).sum()
    return float(total / gnmt_penalty(len(gold), alpha))


@pytest.mark.parametrize("arch", ARCHS)
def test_beam_one_equals_greedy(arch):
    model = new_model(arch)
    src, src_lens, _ = held_out()
    max_lens = max_output_lengths(src_lens, 1.5, 3)
    greedy = greedy_search(model, src, src_lens, max_lens, need_attention=True, length_penalty=0.6)
    beam = beam_search(model, src, src_lens, 1, max_lens, length_penalty=0.6, need_attention=True)
    for g, (b,) in zip(greedy, beam, strict=True):
        assert g.tokens == b.tokens
        assert g.score == pytest.approx(b.score, abs=1e-5)
        assert torch.allclose(g.attention, b.attention, atol=1e-6)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_nbest_distinct_sorted_and_scores_are_teacher_forced_log_probs(arch, alpha):
    model = new_model(arch)
    src, src_lens, _ = held_out(size=6)
    max_lens = max_output_lengths(src_lens, 1.0, 2)
    results = beam_search(model, src, src_lens, 5, max_lens, length_penalty=alpha, nbest=5)
    for i, nbest in enumerate(results):
        assert len(nbest) == 5
        assert len({tuple(h.tokens) for h in nbest}) == 5
        scores = [h.score for h in nbest]
        assert scores == sorted(scores, reverse=True)
        for h in nbest:
            assert len(h.tokens) <= max_lens[i]
            assert EOS_ID not in h.tokens and BOS_ID not in h.tokens and PAD_ID not in h.tokens
            expected = teacher_forced_score(model, src[i], int(src_lens[i]), h.tokens, alpha)
            assert h.score == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_score_is_teacher_forced_log_prob(arch):
    model = new_model(arch)
    src, src_lens, _ = held_out(size=6)
    hypotheses = greedy_search(model, src, src_lens, max_output_lengths(src_lens, 1.0, 2))
    for i, h in enumerate(hypotheses):
        expected = teacher_forced_score(model, src[i], int(src_lens[i]), h.tokens, 1.0)
        assert h.score == pytest.approx(expected, abs=1e-4)


@pytest.mark.slow  # trains two models in this process
@pytest.mark.parametrize("arch", ARCHS)
def test_attention_is_teacher_forced_cross_attention(arch, trained):
    model = trained[arch]
    src, src_lens, _ = held_out(size=5)
    max_lens = max_output_lengths(src_lens, 1.5, 3)
    results = beam_search(model, src, src_lens, 3, max_lens, nbest=3, need_attention=True)
    for i, nbest in enumerate(results):
        length = int(src_lens[i])
        for h in nbest:
            tgt_in = torch.tensor([[BOS_ID, *h.tokens]])
            with torch.no_grad():
                maps = model.attention_maps(src[i : i + 1, :length], src_lens[i : i + 1], tgt_in)
                expected = shown_cross_attention(maps, -1)
            assert h.attention.shape == (len(h.tokens) + 1, length)
            assert torch.allclose(h.attention, expected[0].mean(0), atol=1e-5)
            assert torch.allclose(h.attention.sum(1), torch.ones(len(h.tokens) + 1), atol=1e-5)


@pytest.mark.slow  # trains two models in this process
@pytest.mark.parametrize("arch", ARCHS)
def test_batched_decoding_equals_one_sentence_at_a_time(arch, trained):
    model = trained[arch]
    src, src_lens, _ = held_out(size=10, seed=7)
    max_lens = max_output_lengths(src_lens, 1.5, 3)
    batched_beam = beam_search(model, src, src_lens, 3, max_lens, nbest=3)
    batched_greedy = greedy_search(model, src, src_lens, max_lens)
    for i in range(len(src)):
        one = slice(i, i + 1)
        s = src[one, : src_lens[i]]
        (alone_beam,) = beam_search(model, s, src_lens[one], 3, max_lens[one], nbest=3)
        (alone_greedy,) = greedy_search(model, s, src_lens[one], max_lens[one])
        for batched, alone in zip(
            [*batched_beam[i], batched_greedy[i]], [*alone_beam, alone_greedy], strict=True
        ):
            assert batched.tokens == alone.tokens
            assert batched.score == pytest.approx(alone.score, abs=1e-4)


def count_batch_sizes(model: Seq2SeqModel, monkeypatch) -> list[int]:
    """Record the number of rows of every decode_step call."""
    sizes: list[int] = []
    step = model.decode_step

    def counting_step(state, prev_tokens, cache, need_attention=False):
        sizes.append(len(prev_tokens))
        return step(state, prev_tokens, cache, need_attention)

    monkeypatch.setattr(model, "decode_step", counting_step)
    return sizes


@pytest.mark.slow  # trains two models in this process
@pytest.mark.parametrize("arch", ARCHS)
def test_finished_sentences_leave_the_batch(arch, trained, monkeypatch):
    model = trained[arch]
    src, src_lens, _ = reversal_batch(8, torch.Generator().manual_seed(5), min_len=1, max_len=8)
    max_lens = max_output_lengths(src_lens, 2.0, 5)
    sizes = count_batch_sizes(model, monkeypatch)
    hypotheses = greedy_search(model, src, src_lens, max_lens)
    # Greedy: the rows at step t are exactly the sentences whose output (EOS included) is longer.
    output_lens = [len(h.tokens) + 1 for h in hypotheses]
    assert sizes == [sum(n > t for n in output_lens) for t in range(max(output_lens))]
    assert sizes[-1] < sizes[0]

    sizes.clear()
    beam_size = 3
    results = beam_search(model, src, src_lens, beam_size, max_lens, nbest=beam_size)
    assert sizes[0] == len(src) * beam_size
    assert all(size % beam_size == 0 for size in sizes)
    assert sizes == sorted(sizes, reverse=True)
    assert sizes[-1] < sizes[0]
    assert len(sizes) < int(max_lens.max()) + 1  # no sentence ran to its length limit
    assert all(len(nbest) == beam_size for nbest in results)


@pytest.mark.slow  # trains two models in this process
@pytest.mark.parametrize("arch", ARCHS)
def test_stop_early_ends_a_sentence_when_its_best_candidate_ends(arch, trained, monkeypatch):
    """Without a length penalty no later hypothesis can beat a best candidate that ended (its
    log-probability only falls), so stopping there gives the same best translations from fewer
    decoder rows. With one, a later, longer hypothesis may score higher: never the reverse."""
    model = trained[arch]
    src, src_lens, _ = held_out(size=12, seed=9)
    max_lens = max_output_lengths(src_lens, 1.5, 3)
    sizes = count_batch_sizes(model, monkeypatch)
    for alpha in (0.0, 1.0):
        sizes.clear()
        full = beam_search(model, src, src_lens, 4, max_lens, length_penalty=alpha)
        full_rows = sum(sizes)
        sizes.clear()
        early = beam_search(
            model, src, src_lens, 4, max_lens, length_penalty=alpha, nbest=2, stop_early=True
        )
        assert sum(sizes) < full_rows
        assert all(len(nbest) == 2 for nbest in early)
        for (best,), (early_best, _) in zip(full, early, strict=True):
            if alpha == 0.0:
                assert early_best.tokens == best.tokens
                assert early_best.score == pytest.approx(best.score, abs=1e-5)
            elif early_best.tokens != best.tokens:
                assert early_best.score < best.score
                assert len(early_best.tokens) < len(best.tokens)


def repeated_ngrams(tokens: list[int], n: int) -> bool:
    ngrams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(ngrams) != len(set(ngrams))


@pytest.mark.parametrize("arch", ARCHS)
def test_no_repeat_ngram(arch):
    model = new_model(arch)  # an untrained model repeats itself a lot
    src, src_lens, _ = held_out(size=8)
    max_lens = max_output_lengths(src_lens, 2.0, 8)
    for n in (2, 3):
        free = beam_search(model, src, src_lens, 4, max_lens, nbest=4)
        banned = beam_search(model, src, src_lens, 4, max_lens, nbest=4, no_repeat_ngram=n)
        greedy = greedy_search(model, src, src_lens, max_lens, no_repeat_ngram=n)
        assert any(repeated_ngrams(h.tokens, n) for nbest in free for h in nbest)
        assert not any(repeated_ngrams(h.tokens, n) for nbest in banned for h in nbest)
        assert not any(repeated_ngrams(h.tokens, n) for h in greedy)


def longest_run(tokens: list[int]) -> int:
    """The most times one token comes in a row."""
    return max((len(list(run)) for _, run in itertools.groupby(tokens)), default=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_max_piece_repeat(arch):
    model = new_model(arch)
    src, src_lens, _ = held_out(size=8)
    max_lens = max_output_lengths(src_lens, 2.0, 8)
    free = beam_search(model, src, src_lens, 4, max_lens, nbest=4)
    assert max(longest_run(h.tokens) for nbest in free for h in nbest) > 1
    for r in (1, 2):
        limited = beam_search(model, src, src_lens, 4, max_lens, nbest=4, max_piece_repeat=r)
        greedy = greedy_search(model, src, src_lens, max_lens, max_piece_repeat=r)
        assert max(longest_run(h.tokens) for nbest in limited for h in nbest) <= r
        assert max(longest_run(h.tokens) for h in greedy) <= r


def test_max_piece_repeat_bans_exactly_the_repeated_piece():
    log_probs = torch.zeros(2, 6)
    history = torch.tensor([[4, 5, 5], [5, 4, 5]])  # row 0 ends with 5 twice, row 1 does not
    banned = _banned_log_probs(log_probs, history, torch.tensor([False, False]), 0, 2)
    never = [PAD_ID, BOS_ID]
    assert banned[0].isneginf().nonzero().flatten().tolist() == sorted([*never, 5])
    assert banned[1].isneginf().nonzero().flatten().tolist() == sorted(never)


@pytest.mark.slow  # trains two models in this process
@pytest.mark.parametrize("arch", ARCHS)
def test_output_ends_at_max_length(arch, trained):
    model = trained[arch]  # it would copy all 8 symbols back without the limits below
    src, src_lens, _ = reversal_batch(4, torch.Generator().manual_seed(3), min_len=8)
    max_lens = torch.tensor([0, 1, 2, 3])
    assert [len(h.tokens) for h in greedy_search(model, src, src_lens, max_lens)] == [0, 1, 2, 3]
    results = beam_search(model, src, src_lens, 2, max_lens, nbest=2)
    assert [len(nbest[0].tokens) for nbest in results] == [0, 1, 2, 3]
    assert all(len(h.tokens) <= max_lens[i] for i, nbest in enumerate(results) for h in nbest)


def as_text(rows: list[list[int]]) -> list[str]:
    return [" ".join(map(str, row)) for row in rows]


@pytest.mark.slow  # trains two models in this process
@pytest.mark.parametrize("arch", ARCHS)
def test_trained_model_reverses_held_out_sequences(arch, trained):
    model = trained[arch]
    src, src_lens, tgt = held_out(size=100, seed=99)
    references = as_text([row[1 : row.tolist().index(EOS_ID)].tolist() for row in tgt])
    max_lens = max_output_lengths(src_lens, 1.5, 5)
    greedy = as_text([h.tokens for h in greedy_search(model, src, src_lens, max_lens)])
    beam = as_text([n[0].tokens for n in beam_search(model, src, src_lens, 4, max_lens)])
    assert sacrebleu.corpus_bleu(greedy, [references]).score >= 95
    assert sacrebleu.corpus_bleu(beam, [references]).score >= 95


@pytest.mark.slow  # trains two models in this process
@pytest.mark.parametrize("arch", ARCHS)
def test_int8_copy_decodes_as_the_fp32_model(arch, trained):
    """The int8 copy's log-probabilities stay within quantization error of the model's, so beam
    search finds the same reversals (at least 98 of 100); the model keeps its fp32 weights."""
    model = trained[arch]
    weights = {name: p.clone() for name, p in model.state_dict().items()}
    int8 = quantized_copy(model)
    assert not any(isinstance(m, torch.nn.Linear | torch.nn.GRU) for m in int8.modules())
    assert all(torch.equal(p, weights[name]) for name, p in model.state_dict().items())
    src, src_lens, _ = held_out(size=100, seed=99)

    def first_step_probs(m: Seq2SeqModel) -> torch.Tensor:
        with torch.no_grad():
            state = m.encode(src, src_lens)
            bos = torch.full((len(src),), BOS_ID)
            return m.decode_step(state, bos, m.init_cache(state)).log_probs.exp()

    difference = (first_step_probs(model) - first_step_probs(int8)).abs().max()
    assert 0 < difference < 0.1
    max_lens = max_output_lengths(src_lens, 1.5, 5)
    expected, got = (
        [n[0].tokens for n in beam_search(m, src, src_lens, 4, max_lens)] for m in (model, int8)
    )
    # int8 kernels round differently on each CPU: a near-tie may end one sentence a piece sooner
    same = sum(g == e for g, e in zip(got, expected, strict=True))
    assert same >= 98, f"{100 - same} of 100 sentences differ"
