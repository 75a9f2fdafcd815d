"""The speed work (seq2seq.fast), each piece against the plain version it replaces: the packed
dropout mask (its distribution, scale, gradient and seeding), the hand-written loss, the chunked
top-k, beam-grouped, fused and inference attention, the int8 linear layer, a whole fast
model (and its int8 copy) against its plain twin, the searches reading the device as a GPU does
against the textbook's; and the switch between them (model.fast, --plain): the textbook modules
import nothing of seq2seq.fast, and the plain product translates and trains as the fast one
while running the textbook code."""

import ast
from collections import Counter
from pathlib import Path

import pytest
import torch
import torch.ao.nn.quantized.dynamic
from reversal import tiny_overrides
from test_attention import EMBED, HEADS, paired_modules
from test_imports import ROOT, library_imports, reachable
from test_search import ARCHS, CHANGES, VOCAB, held_out, new_model
from tiny import tiny_model

import seq2seq
from seq2seq.checkpoints import load_checkpoint
from seq2seq.commands import serve, translate
from seq2seq.config import Config
from seq2seq.config_file import config_from_dict, load_config
from seq2seq.data.batching import Batch
from seq2seq.data.specials import EOS_ID, PAD_ID
from seq2seq.decoding import search
from seq2seq.decoding.beam_trace import BeamTrace
from seq2seq.decoding.line_translator import Hypothesis, Stopped
from seq2seq.decoding.quantize import quantized_copy
from seq2seq.decoding.search import (
    CHECK_EVERY,
    EVERY_STEP,
    BatchedReads,
    beam_search,
    max_output_lengths,
)
from seq2seq.decoding.torch_translator import fast_int8_copy, int8_copier, reads_for
from seq2seq.fast import FAST_TWINS, FastModel, FastTransformerSeq2Seq, speed_up
from seq2seq.fast import loss as fast_loss
from seq2seq.fast.attention import BeamGroupedAttention
from seq2seq.fast.dropout import PackedDropout
from seq2seq.fast.dropout import packed_dropout as dropout
from seq2seq.fast.int8 import Int8Linear
from seq2seq.fast.topk import best_candidates
from seq2seq.models import Seq2SeqModel, TransformerSeq2Seq
from seq2seq.models.attention import MultiHeadAttention, causal_mask, padding_mask
from seq2seq.training.loop import train
from seq2seq.training.loss import label_smoothed_cross_entropy, token_losses
from seq2seq.training.run import cross_entropy_of

N = 1_000_000
MODEL = "transformer-tiny.multi30k.en-de"
SENTENCES = [
    "Two dogs play in the snow.",
    "A man in an orange hat starring at something.",
    "A little girl climbs into a wooden playhouse.",
    "People are walking.",
]


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_keeps_each_element_with_probability_one_minus_p(p: float) -> None:
    torch.manual_seed(0)
    out = dropout(torch.ones(N), p, training=True)
    kept = out != 0
    rounded_p = round(p * 2**15) / 2**15
    sigma = (p * (1 - p) / N) ** 0.5
    assert abs(kept.float().mean().item() - (1 - p)) < 5 * sigma
    assert torch.all(out[kept] == 1 / (1 - rounded_p))
    # The four elements drawn from one 64-bit word are independent: equal keep rates in each
    # slot, and no correlation between neighbours.
    slots = kept.view(-1, 4).float()
    assert (slots.mean(dim=0) - (1 - p)).abs().max() < 5 * sigma * 2
    neighbours = torch.corrcoef(torch.stack([kept[:-1].float(), kept[1:].float()]))[0, 1]
    assert abs(neighbours.item()) < 0.01


def test_gradient_flows_through_kept_elements_only() -> None:
    torch.manual_seed(0)
    x = torch.randn(7, 33, requires_grad=True)
    out = dropout(x, 0.3, training=True)
    out.sum().backward()
    scale = 2**15 / (2**15 - round(0.3 * 2**15))
    torch.testing.assert_close(x.grad, (out != 0).float() * scale)


def test_identity_when_not_training_or_p_is_zero() -> None:
    x = torch.randn(5, 6)
    module = PackedDropout(0.3).eval()
    assert module(x) is x
    assert dropout(x, 0.0, training=True) is x
    assert torch.all(dropout(x, 1.0, training=True) == 0)


def test_same_seed_same_mask() -> None:
    x = torch.randn(4, 9, 17)
    torch.manual_seed(3)
    first = dropout(x, 0.3, training=True)
    torch.manual_seed(3)
    assert torch.equal(first, dropout(x, 0.3, training=True))
    assert not torch.equal(first, dropout(x, 0.3, training=True))


# The loss ----------------------------------------------------------------------------------


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_fast_loss_equals_the_plain_loss_and_its_gradient(smoothing: float) -> None:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(20, 11, generator=generator, requires_grad=True)
    target = torch.randint(4, 11, (20,), generator=generator)
    target[::3] = PAD_ID
    loss, nll = fast_loss.label_smoothed_cross_entropy(logits, target, smoothing)
    plain_loss, plain_nll = label_smoothed_cross_entropy(logits, target, smoothing)
    torch.testing.assert_close(loss, plain_loss)
    torch.testing.assert_close(nll, plain_nll)
    assert not nll.requires_grad and not plain_nll.requires_grad
    (grad,) = torch.autograd.grad(loss, logits)
    (plain_grad,) = torch.autograd.grad(plain_loss, logits)
    torch.testing.assert_close(grad, plain_grad)
    assert grad[::3].abs().max() == 0.0


def test_fast_loss_gradient_is_p_minus_q_by_finite_differences() -> None:
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(6, 7, dtype=torch.float64, generator=generator, requires_grad=True)
    target = torch.tensor([4, 5, PAD_ID, 6, 4, PAD_ID])
    assert torch.autograd.gradcheck(
        lambda z: fast_loss.label_smoothed_cross_entropy(z, target, 0.2)[0], (logits,)
    )


# Top-k -------------------------------------------------------------------------------------


@pytest.mark.parametrize("vocab_size", [8000, 6000, 8009])  # chunks of 64, 60; none
@pytest.mark.parametrize("beams", [1, 5])
def test_best_candidates_equal_topk_of_the_sum(vocab_size, beams):
    generator = torch.Generator().manual_seed(vocab_size + beams)
    sentences, n = 6, 2 * beams

    def check(beam_scores: torch.Tensor, log_probs: torch.Tensor, exact: int) -> None:
        values, index = best_candidates(beam_scores, log_probs, n)
        total = (beam_scores.view(-1, 1) + log_probs).view(sentences, -1)
        expected = total.topk(exact, dim=1)
        assert torch.equal(values[:, :exact], expected.values)
        assert torch.equal(index[:, :exact], expected.indices)
        assert torch.equal(total.gather(1, index), values)

    beam_scores = torch.randn(sentences, beams, generator=generator) * 5
    log_probs = torch.randn(sentences * beams, vocab_size, generator=generator)
    check(beam_scores, log_probs, n)
    # The first step: only beam 0 is live.
    beam_scores[:, 1:] = float("-inf")
    check(beam_scores, log_probs, n)
    # The forced EOS of the last step leaves K finite candidates among K * V: the first K
    # answers are exact and the rest point at -inf entries.
    log_probs.fill_(float("-inf"))
    log_probs[:, EOS_ID] = torch.randn(sentences * beams, generator=generator)
    beam_scores = torch.randn(sentences, beams, generator=generator)
    check(beam_scores, log_probs, beams)
    assert best_candidates(beam_scores, log_probs, n)[0][:, beams:].isneginf().all()


# The GPU's reads of the device ---------------------------------------------------------------


def outputs(nbest_lists: list[list[Hypothesis]]) -> list:
    """Every hypothesis's tokens, score and attention, per sentence, in order."""
    return [[(h.tokens, h.score, h.attention.tolist()) for h in nbest] for nbest in nbest_lists]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_batched_reads_checking_every_step_give_the_textbook_outputs_bit_for_bit(arch, fast, alpha):
    """With check_every = 1 the rows of each step are the textbook's, so every product is the
    same: the same n-best lists, scores and attention to the last bit, on fp32."""
    model = new_model(arch, fast)
    src, src_lens, _ = held_out(size=13, seed=1)
    max_lens = max_output_lengths(src_lens, 1.5, 3)
    bans = dict(no_repeat_ngram=2, max_piece_repeat=2)
    expected = search.greedy_search(model, src, src_lens, max_lens, True, alpha, **bans)
    got = search.greedy_search(
        model, src, src_lens, max_lens, True, alpha, **bans, reads=BatchedReads(1)
    )
    assert outputs([expected]) == outputs([got])
    for k in (1, 5):
        for stop_early in (False, True):
            options = dict(nbest=k, need_attention=True, stop_early=stop_early, **bans)
            expected = search.beam_search(model, src, src_lens, k, max_lens, alpha, **options)
            got = search.beam_search(
                model, src, src_lens, k, max_lens, alpha, **options, reads=BatchedReads(1)
            )
            assert outputs(expected) == outputs(got)


@pytest.mark.parametrize("arch", ARCHS)
def test_batched_reads_checking_every_8_steps_find_the_textbook_translations(arch):
    """With finished sentences kept until the next check, a step's matrix products have more
    rows than the textbook's, and a CPU's products round a row differently by the row count
    (as batched decoding does against one sentence at a time): the same tokens, and scores
    equal within that rounding."""
    model = new_model(arch)
    src, src_lens, _ = held_out(size=13, seed=1)
    max_lens = max_output_lengths(src_lens, 1.5, 3)
    reads = BatchedReads(8)
    expected = search.greedy_search(model, src, src_lens, max_lens)
    got = search.greedy_search(model, src, src_lens, max_lens, reads=reads)
    assert [h.tokens for h in got] == [h.tokens for h in expected]
    assert [h.score for h in got] == pytest.approx([h.score for h in expected], abs=1e-5)
    expected_beams = search.beam_search(model, src, src_lens, 3, max_lens, 0.6, nbest=3)
    got_beams = search.beam_search(model, src, src_lens, 3, max_lens, 0.6, nbest=3, reads=reads)
    assert [[h.tokens for h in n] for n in got_beams] == [
        [h.tokens for h in n] for n in expected_beams
    ]
    best = [h.score for n in expected_beams for h in n]
    assert [h.score for n in got_beams for h in n] == pytest.approx(best, abs=1e-5)


@pytest.mark.parametrize("fast", [False, True])
def test_batched_reads_of_one_sentence_give_the_textbook_outputs_bit_for_bit(fast):
    """One sentence has the same rows whenever the host reads (it leaves the batch only when
    the search ends): the same n-best lists, scores and attention to the last bit."""
    model = new_model("transformer", fast)
    src, src_lens, _ = held_out(size=1, seed=3)
    max_lens = max_output_lengths(src_lens, 1.5, 3)
    options = dict(nbest=4, need_attention=True, max_piece_repeat=2)
    expected = search.beam_search(model, src, src_lens, 4, max_lens, 0.6, **options)
    got = search.beam_search(
        model, src, src_lens, 4, max_lens, 0.6, **options, reads=BatchedReads()
    )
    assert outputs(expected) == outputs(got)
    expected = search.greedy_search(model, src, src_lens, max_lens, True, 0.6)
    got = search.greedy_search(model, src, src_lens, max_lens, True, 0.6, reads=BatchedReads())
    assert outputs([expected]) == outputs([got])


def test_a_traced_beam_search_reads_every_step():
    """A trace records the steps of a running sentence: with it the search reads as the
    textbook's, whatever `reads` says."""
    model = new_model("transformer")
    src, src_lens, _ = held_out(size=1, seed=3)
    max_lens = max_output_lengths(src_lens, 1.5, 3)
    traces = BeamTrace(), BeamTrace()
    expected = search.beam_search(model, src, src_lens, 4, max_lens, nbest=4, trace=traces[0])
    got = search.beam_search(
        model, src, src_lens, 4, max_lens, nbest=4, trace=traces[1], reads=BatchedReads()
    )
    assert [(h.tokens, h.score) for h in got[0]] == [(h.tokens, h.score) for h in expected[0]]
    assert len(traces[1].steps) == len(traces[0].steps) > 2
    for ours, theirs in zip(traces[1].steps, traces[0].steps, strict=True):
        assert torch.equal(ours.tokens, theirs.tokens)
        assert torch.equal(ours.next_beam, theirs.next_beam)
        assert torch.equal(ours.finished, theirs.finished)


def test_batched_reads_honour_should_stop():
    model = new_model("gru")
    src, src_lens, _ = held_out(size=4, seed=3)
    max_lens = max_output_lengths(src_lens, 1.5, 3)
    calls: list[int] = []

    def stop_at_third_step() -> bool:
        calls.append(1)
        return len(calls) == 3

    reads = BatchedReads()
    with pytest.raises(Stopped):
        search.beam_search(
            model, src, src_lens, 3, max_lens, should_stop=stop_at_third_step, reads=reads
        )
    assert len(calls) == 3
    calls.clear()
    with pytest.raises(Stopped):
        search.greedy_search(
            model, src, src_lens, max_lens, should_stop=stop_at_third_step, reads=reads
        )
    assert len(calls) == 3


@pytest.mark.parametrize("arch", ARCHS)
def test_the_translator_reads_in_batches_only_with_a_fast_model_on_a_gpu(arch):
    """`--plain` decodes with the textbook's reads on every device, and so does a CPU."""
    plain, fast = new_model(arch, False), new_model(arch, True)
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    assert reads_for(fast, gpu) == BatchedReads(CHECK_EVERY)
    assert reads_for(plain, gpu) is EVERY_STEP
    assert reads_for(fast, cpu) is EVERY_STEP
    assert reads_for(plain, cpu) is EVERY_STEP


# Attention ---------------------------------------------------------------------------------


def fast_twin(plain: MultiHeadAttention) -> BeamGroupedAttention:
    """`plain` switched to the fast class, as `speed_up` does (same weights)."""
    return speed_up(plain)


@pytest.fixture
def fused_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the fused kernel where weights are not asked for, as on CUDA."""
    monkeypatch.setattr("seq2seq.fast.attention.fused_kernel_pays", lambda device: True)


@pytest.mark.parametrize("masking", ["none", "padding", "causal", "padding+causal"])
def test_fused_kernel_equals_the_plain_attention(masking: str, fused_on_cpu: None) -> None:
    plain, _ = paired_modules()
    x = torch.randn(3, 6, EMBED)
    mask = padding_mask(torch.tensor([6, 4, 1]), 6) if "padding" in masking else None
    if "causal" in masking:
        mask = causal_mask(6) if mask is None else mask & causal_mask(6)
    expected, expected_weights = plain(x, x, mask, need_weights=True)
    fast = fast_twin(plain)
    fused, no_weights = fast(x, x, mask)
    explicit, weights = fast(x, x, mask, need_weights=True)
    assert no_weights is None
    torch.testing.assert_close(fused, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(explicit, expected, rtol=0, atol=0)
    torch.testing.assert_close(weights, expected_weights, rtol=0, atol=0)


def test_fused_kernel_rows_without_keys_are_zero_and_finite(fused_on_cpu: None) -> None:
    plain, _ = paired_modules()
    fast = fast_twin(plain).train()  # gradients through the kernel; no dropout configured
    queries = torch.randn(2, 3, EMBED, requires_grad=True)
    memory = torch.randn(2, 4, EMBED)
    fused, _ = fast(queries, memory, torch.tensor([0, 2]))  # row 0 may attend to nothing
    torch.testing.assert_close(fused[0], fast.out_proj.bias.expand(3, EMBED).detach())
    fused.sum().backward()
    assert torch.isfinite(queries.grad).all()


@pytest.mark.parametrize("masking", ["none", "padding"])
def test_fused_kernel_never_chooses_cudnn(
    masking: str, fused_on_cpu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cuDNN's attention prepares a plan for every new shape, which decoding (keys growing by
    one a step) and training on batches of many lengths would pay again and again: the fused
    kernel is called with it switched off, and the switch is restored afterwards."""
    cudnn_allowed = []
    kernel = torch.nn.functional.scaled_dot_product_attention

    def recording_kernel(*args: object, **kwargs: object) -> torch.Tensor:
        cudnn_allowed.append(torch.backends.cuda.cudnn_sdp_enabled())
        return kernel(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording_kernel)
    before = torch.backends.cuda.cudnn_sdp_enabled()
    x = torch.randn(3, 6, EMBED)
    mask = padding_mask(torch.tensor([6, 4, 1]), 6) if masking == "padding" else None
    fast_twin(paired_modules()[0])(x, x, mask)
    assert cudnn_allowed == [False]
    assert torch.backends.cuda.cudnn_sdp_enabled() == before


def test_fused_kernel_compiles_in_one_graph(fused_on_cpu: None) -> None:
    """train.compile=true: the kernel choice is part of the graph, not a break in it."""
    fast = fast_twin(paired_modules()[0]).train()
    x = torch.randn(3, 6, EMBED)
    mask = padding_mask(torch.tensor([6, 4, 1]), 6)
    torch._dynamo.reset()
    compiled = torch.compile(fast, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(x, x, mask)[0], fast(x, x, mask)[0])


@pytest.mark.parametrize("masking", ["none", "padding", "causal", "padding+causal"])
def test_inference_attention_equals_the_plain_attention(masking: str) -> None:
    """Without gradients (decoding), the fast module runs `inference_attention`: the same values
    as the plain module, bit for bit, also for the rows with no key to attend (zeros)."""
    plain, _ = paired_modules()
    x = torch.randn(3, 6, EMBED)
    mask = padding_mask(torch.tensor([6, 4, 0]), 6) if "padding" in masking else None
    if "causal" in masking:
        mask = causal_mask(6) if mask is None else mask & causal_mask(6)
    with torch.no_grad():
        expected, _ = plain(x, x, mask)
        got, weights = fast_twin(plain)(x, x, mask)
    assert weights is None
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    if "padding" in masking:  # row 2 attends to nothing: its output is W_o's bias alone
        torch.testing.assert_close(got[2], plain.out_proj.bias.expand(6, EMBED), rtol=0, atol=0)


@pytest.mark.parametrize("need_weights", [True, False])
def test_beams_grouped_over_one_source_equal_the_plain_attention_over_copies(
    need_weights: bool,
) -> None:
    plain, _ = paired_modules()
    beams, memory = 3, torch.randn(2, 5, EMBED)
    lens = torch.tensor([5, 2])
    queries = torch.randn(2 * beams, 1, EMBED)
    rows = torch.arange(2).repeat_interleave(beams)
    with torch.no_grad():  # need_weights=False: `inference_attention`
        k, v = plain.project_kv(memory)
        q = plain.project_q(queries)
        expected, expected_weights = plain.attend(q, k[rows], v[rows], lens[rows], True)
        grouped, weights = fast_twin(plain).attend(q, k, v, lens, need_weights)
    torch.testing.assert_close(grouped, expected, rtol=1e-6, atol=1e-6)
    if need_weights:
        torch.testing.assert_close(weights, expected_weights, rtol=1e-6, atol=1e-6)
        assert weights.shape == (2 * beams, HEADS, 1, 5)
    else:
        assert weights is None


def test_int8_linear_equals_pytorchs_dynamic_int8_linear() -> None:
    """The same kernel with the same weights and arguments: equal bit for bit."""
    linear = torch.nn.Sequential(torch.nn.Linear(16, 24))
    quantized = quantized_copy(linear)[0]
    assert type(quantized) is torch.ao.nn.quantized.dynamic.Linear
    fast = speed_up(quantized_copy(linear))[0]
    assert type(fast) is Int8Linear
    for shape in [(7, 16), (3, 5, 16)]:
        x = torch.randn(shape)
        assert torch.equal(fast(x), quantized(x))
        assert fast(x).dtype == x.dtype


# A whole model -----------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
def test_fast_model_translates_and_scores_as_its_plain_twin(arch: str) -> None:
    plain, fast = new_model(arch, fast=False), new_model(arch)
    assert isinstance(fast, FastModel) and not isinstance(plain, FastModel)
    assert {k: v.shape for k, v in fast.state_dict().items()} == {
        k: v.shape for k, v in plain.state_dict().items()
    }
    fast.load_state_dict(plain.state_dict())
    src, src_lens, tgt = held_out(12)
    torch.testing.assert_close(fast(src, src_lens, tgt[:, :-1]), plain(src, src_lens, tgt[:, :-1]))
    max_lens = max_output_lengths(src_lens, 1.5, 2)
    outputs = [
        beam_search(model, src, src_lens, 4, max_lens, nbest=2, need_attention=True)
        for model in (plain, fast)
    ]
    for plain_nbest, fast_nbest in zip(*outputs, strict=True):
        assert [h.tokens for h in fast_nbest] == [h.tokens for h in plain_nbest]
        for fast_h, plain_h in zip(fast_nbest, plain_nbest, strict=True):
            assert fast_h.score == pytest.approx(plain_h.score, abs=1e-5)
            torch.testing.assert_close(fast_h.attention, plain_h.attention)


@pytest.mark.parametrize("arch", ARCHS)
def test_int8_copy_of_a_fast_model_decodes_as_the_plain_int8_copy(arch: str) -> None:
    plain, fast = new_model(arch, fast=False), new_model(arch)
    fast.load_state_dict(plain.state_dict())
    assert (int8_copier(plain), int8_copier(fast)) == (quantized_copy, fast_int8_copy)
    plain_int8, fast_int8 = int8_copier(plain)(plain), int8_copier(fast)(fast)
    assert isinstance(fast_int8, FastModel) and not isinstance(plain_int8, FastModel)
    linears = [
        type(m) for m in fast_int8.modules() if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)
    ]
    assert linears and set(linears) == {Int8Linear}
    assert not any(type(m) is Int8Linear for m in plain_int8.modules())
    src, src_lens, _ = held_out(12)
    max_lens = max_output_lengths(src_lens, 1.5, 2)
    outputs = [beam_search(m, src, src_lens, 4, max_lens) for m in (plain_int8, fast_int8)]
    for plain_nbest, fast_nbest in zip(*outputs, strict=True):
        assert fast_nbest[0].tokens == plain_nbest[0].tokens
        assert fast_nbest[0].score == pytest.approx(plain_nbest[0].score, abs=1e-5)


def test_speed_up_swaps_the_model_dropout_and_attention_only(tiny_model) -> None:
    model = tiny_model("transformer", fast=False)
    kinds = [type(m) for m in model.modules()]
    speed_up(model)
    swapped = [type(m) for m in model.modules()]
    assert kinds.count(torch.nn.Dropout) == swapped.count(PackedDropout) > 0
    assert kinds.count(MultiHeadAttention) == swapped.count(BeamGroupedAttention) > 0
    changed = {(a, b) for a, b in zip(kinds, swapped, strict=True) if a is not b}
    assert changed == {
        (TransformerSeq2Seq, FastTransformerSeq2Seq),
        (torch.nn.Dropout, PackedDropout),
        (MultiHeadAttention, BeamGroupedAttention),
    }


# The switch: model.fast, --plain ------------------------------------------------------------

# The modules a reader opens first, and every module of the seq2seq.models package.
TEXTBOOK = (
    "seq2seq.models",
    "seq2seq.training.loss",
    "seq2seq.decoding.search",
    "seq2seq.decoding.quantize",
)
# Where a model is set up for training or decoding: the only readers of `model.fast`.
SET_UP_FILES = ["seq2seq/training/run.py", "seq2seq/decoding/open_pytorch.py"]


def test_the_textbook_modules_import_nothing_of_seq2seq_fast() -> None:
    """Neither directly nor through the modules they import."""
    graph = library_imports()
    textbook = [m for m in graph if m in TEXTBOOK or m.startswith("seq2seq.models.")]
    # attention, base, gru, kernel_regression, positional, size, transformer
    assert len(textbook) == len(TEXTBOOK) + 7
    for module in textbook:
        imported = reachable(graph, module)
        assert not {name for name in imported if name.startswith("seq2seq.fast")}, module
    assert "seq2seq.models" in graph["seq2seq.fast"]  # the graph holds the imports it should


def test_only_the_set_up_reads_the_fast_flag() -> None:
    """`.fast` is read where a model is built for training or decoding, and the options that
    set it (--plain) change it; no search, loss or model asks it afterwards."""
    readers = set()
    for path in (ROOT / "seq2seq").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "fast":
                readers.add(path.relative_to(ROOT).as_posix())
    assert readers == {*SET_UP_FILES, "seq2seq/commands/train.py"}


def shipped_translation(plain: bool, capsys: pytest.CaptureFixture[str], path: Path) -> list[str]:
    """`seq2seq translate` (with --plain when `plain`) of the lines of `path`, in fp32, beam 5,
    with the shipped MODEL."""
    options = ["--model", MODEL, "--input", str(path), "--nbest", "2"]
    translate.main([*options, "--precision", "fp32", "--beam", "5", *(["--plain"] * plain)])
    return capsys.readouterr().out.splitlines()


@pytest.fixture
def counted_textbook_calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many times the textbook attention and beam state run (each wrapped to count)."""
    calls: Counter[str] = Counter()
    for cls, name in ((MultiHeadAttention, "attend"), (Seq2SeqModel, "beam_state")):
        original = getattr(cls, name)

        def counted(*args, original=original, name=name, **kwargs):
            calls[name] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(cls, name, counted)
    return calls


def test_translate_plain_runs_the_textbook_code_to_the_same_translations(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, counted_textbook_calls: Counter[str]
) -> None:
    path = tmp_path / "input.en"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    fast = shipped_translation(False, capsys, path)
    assert counted_textbook_calls == {}  # the fast twins override both
    plain = shipped_translation(True, capsys, path)
    # One batch: a beam state at the start, and again when some of its sentences are done.
    assert 1 <= counted_textbook_calls["beam_state"] <= len(SENTENCES)
    assert counted_textbook_calls["attend"] > 3 * len(SENTENCES)
    assert len(plain) == 2 * len(SENTENCES)
    for plain_line, fast_line in zip(plain, fast, strict=True):  # N ||| text ||| score
        number, text, score = plain_line.split(" ||| ")
        assert fast_line.split(" ||| ")[:2] == [number, text]
        assert float(fast_line.split(" ||| ")[2]) == pytest.approx(float(score), abs=1e-4)


def test_load_plain_gives_the_textbook_model_and_says_so() -> None:
    plain, fast = (seq2seq.load(MODEL, "cpu", "fp32", plain=p) for p in (True, False))
    assert type(plain.inference.model) is TransformerSeq2Seq
    assert type(fast.inference.model) is FastTransformerSeq2Seq
    assert (plain.inference.config.model.fast, fast.inference.config.model.fast) == (False, True)
    assert plain.translate(SENTENCES[:2]) == fast.translate(SENTENCES[:2])
    types = {type(m) for m in int8_copier(plain.inference.model)(plain.inference.model).modules()}
    assert torch.ao.nn.quantized.dynamic.Linear in types and not types & set(FAST_TWINS.values())


def test_serve_plain_serves_the_textbook_model() -> None:
    """`seq2seq serve --plain` (and `seq2seq explore --plain`, which parses the same options)."""
    for plain in (True, False):
        args = serve.parse_args(["--model", MODEL, *(["--plain"] * plain)])
        (served,) = serve.load_models(args).values()
        model = served.translator.model  # the int8 copy: a CPU serves in int8
        types = {type(m) for m in model.modules()}
        assert (Int8Linear in types, FastTransformerSeq2Seq in types) == (not plain, not plain)


def test_a_saved_configuration_without_model_fast_loads_as_fast() -> None:
    values = Config().to_dict()
    del values["model"]["fast"]
    assert config_from_dict(values).model.fast is True
    assert load_config(None, ["model.fast=false"]).model.fast is False


@pytest.mark.parametrize("arch", ARCHS)
def test_plain_and_fast_train_alike(arch: str) -> None:
    """Three SGD updates of a model without dropout, through `token_losses` with each model's
    own loss: the same losses, gradients and weights. (Adam would divide gradients that are
    zero but for rounding by their own size, and tell apart what is equal.)"""
    src, src_lens, tgt = held_out(12)
    batch = Batch(src, src_lens, tgt, (tgt != PAD_ID).sum(dim=1), torch.arange(12), 0, 0)
    changes = {**CHANGES[arch], "attention_dropout": 0.0}
    models = tuple(tiny_model(arch, VOCAB, fast, **changes).train() for fast in (False, True))
    losses_of = [cross_entropy_of(model) for model in models]
    assert losses_of == [label_smoothed_cross_entropy, fast_loss.label_smoothed_cross_entropy]
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in models]
    for _ in range(3):
        losses = []
        for model, optimizer in zip(models, optimizers, strict=True):
            optimizer.zero_grad()
            loss, nll, _ = token_losses(model, batch, 0.1, None, cross_entropy_of(model))
            (loss / int((tgt[:, 1:] != PAD_ID).sum())).backward()
            optimizer.step()
            losses.append((loss.item(), nll.item()))
        assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    plain, fast = (dict(m.named_parameters()) for m in models)
    for name, weight in plain.items():
        torch.testing.assert_close(fast[name].grad, weight.grad, rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(fast[name], weight, rtol=1e-4, atol=1e-6)


@pytest.mark.slow  # trains for seconds
def test_training_with_model_fast_false_matches_the_fast_run(reversal: Path, tmp_path: Path):
    """`seq2seq train` with model.fast=false (what --plain sets): the textbook modules train to
    the same validation loss and weights as the fast twins (no dropout, whose masks differ), in
    fp32 on every CPU (precision auto would train in bf16 where the CPU has it).

    Measured apart on AVX-512 and AVX2 (ATEN_CPU_CAPABILITY=avx2): valid NLL by 8e-8 and 0
    (relative; tolerance 1e-4), weights by 1.2e-7 and 6.5e-6 (tolerance 5e-5). The key
    projections' biases are left out: softmax ignores a score added to every key, so their
    gradient is zero but for rounding, and Adam turns that noise into steps of up to the
    learning rate, different in the two runs (1.7e-5 and 1.2e-5 apart after 8 steps)."""
    checkpoints = {}
    for fast in ("true", "false"):
        overrides = [
            *tiny_overrides("transformer", reversal, tmp_path / fast),
            "train.precision=fp32",
            "model.attention_dropout=0.0",
            "train.max_steps=8",
            "train.valid_every=8",
            "train.valid_max_sentences=20",
            "train.attention_samples=0",
            f"model.fast={fast}",
        ]
        progress = train(load_config(None, overrides))
        assert progress.step == 8
        checkpoints[fast] = load_checkpoint(tmp_path / fast / "last.pt")
    assert checkpoints["false"]["config"]["model"]["fast"] is False
    fast_run, plain_run = (checkpoints[f]["training"]["progress"] for f in ("true", "false"))
    assert plain_run["history"][-1]["valid/nll"] == pytest.approx(
        fast_run["history"][-1]["valid/nll"], rel=1e-4
    )
    for name, weight in checkpoints["false"]["model"].items():
        if not name.endswith("k_proj.bias"):
            torch.testing.assert_close(
                checkpoints["true"]["model"][name], weight, rtol=0, atol=5e-5
            )
