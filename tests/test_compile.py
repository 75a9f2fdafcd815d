"""train.compile=true over real training: batches of varying size and lengths must not make
torch.compile recompile the model again and again. Checked on a CPU with Dynamo's "eager"
backend, which captures the same graphs as the default (inductor) and only skips generating
their kernels. Also the GPU speed recipe (configs/transformer.multi30k.en-de.gpu.toml): its
bucketed batches compile once per bucket, its fast paths compute what the plain ones do, and
its configuration runs on a CPU."""

from functools import partial
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

from seq2seq.config_file import load_config
from seq2seq.data.batching import (
    Batch,
    BucketCollate,
    DeviceCorpus,
    ParallelDataset,
    TokenBatchSampler,
    bucket_lengths,
    collate,
)
from seq2seq.data.prepare import prepare
from seq2seq.data.prepared_corpus import PreparedData
from seq2seq.training import loop as train_module
from seq2seq.training.distributed import Dist
from seq2seq.training.loss import token_losses
from seq2seq.training.run import Run, cross_entropy_of
from seq2seq.training.step import Update
from seq2seq.training.validation import validation_translator
from tests.reversal import tiny_overrides
from tests.tiny import VOCAB, tiny_model

GPU_RECIPE = Path(__file__).parents[1] / "configs" / "transformer.multi30k.en-de.gpu.toml"

STEPS = 200
EPOCH_TOKENS = 8192  # the whole epoch of Multi30k in about 70 batches, each of a bucket's shape

# No dropout: on a CPU our dropout draws its mask with Tensor.random_, which Dynamo cannot
# capture, and each call splits the graph (64 pieces for this Transformer, over a minute of
# tracing). On a GPU dropout is F.dropout, inside the graph; without it the two graphs match.
MODELS = {
    "transformer": [
        "model.name=transformer-tiny",
        "model.embed_dim=32",
        "model.ffn_size=64",
        "model.num_heads=2",
        "model.encoder_layers=1",
        "model.decoder_layers=1",
    ],
    "gru": ["model.name=gru", "model.embed_dim=16", "model.hidden_size=32"],
}


def compiled_run_overrides(arch: str, prepared: Path, run_dir: Path) -> list[str]:
    return [
        *MODELS[arch],
        "model.dropout=0.0",
        "model.attention_dropout=0.0",
        f'data.prepared="{prepared}"',
        f'train.run_dir="{run_dir}"',
        'train.device="cpu"',
        'train.precision="fp32"',  # the same graphs on every CPU
        "train.compile=true",
        "train.max_tokens=256",  # 200 batches of 126 shapes: 5-32 sentences of 8-47 tokens
        f"train.max_steps={STEPS}",
        f"train.valid_every={STEPS}",
        "train.valid_max_sentences=8",
        "train.attention_samples=0",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["transformer", "gru"])
def test_compiled_training_stops_compiling_after_the_first_shape_change(
    arch: str, multi30k_en_de: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dynamo compiles each piece of the model for the first batch's exact shapes, and at the
    first batch whose shapes differ compiles it once more with those dimensions dynamic; that
    graph then serves every later batch. So 200 steps compile at most twice the graphs of the
    first step. Per-shape recompiling would go past Dynamo's recompile_limit (8 per piece),
    after which Dynamo silently runs the piece uncompiled: that is made an error here."""
    monkeypatch.setattr(torch, "compile", partial(torch.compile, backend="eager"))
    graphs_after_step = []
    real_update = train_module.train_update

    def counting_update(run: Run, group: list[Batch], step: int) -> Update | None:
        update = real_update(run, group, step)
        graphs_after_step.append(counters["stats"]["unique_graphs"])
        return update

    monkeypatch.setattr(train_module, "train_update", counting_update)
    torch._dynamo.reset()
    counters.clear()
    cfg = load_config(None, compiled_run_overrides(arch, multi30k_en_de, tmp_path / "run"))
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
        train_module.train(cfg)

    assert len(graphs_after_step) == STEPS
    first, total = graphs_after_step[0], graphs_after_step[-1]
    compiling_steps = steps_that_compiled(graphs_after_step)
    assert 0 < first <= total <= 2 * first, f"graphs compiled by step: {compiling_steps}"


def steps_that_compiled(graphs_after_step: list[int]) -> dict[int, int]:
    """{step: graphs compiled up to it} for the steps that compiled a graph."""
    before = [0, *graphs_after_step[:-1]]
    pairs = zip(before, graphs_after_step, strict=True)
    return {step: n for step, (b, n) in enumerate(pairs, 1) if n > b}


def counting_graphs(
    monkeypatch: pytest.MonkeyPatch, graphs_after_step: list[int], shapes: list[tuple]
) -> None:
    """Compile with the "eager" backend, and after each update append the graphs compiled so
    far to `graphs_after_step` and the update's (src, tgt) shapes to `shapes`."""
    monkeypatch.setattr(torch, "compile", partial(torch.compile, backend="eager"))
    real_update = train_module.train_update

    def counting_update(run: Run, group: list[Batch], step: int) -> Update | None:
        update = real_update(run, group, step)
        graphs_after_step.append(counters["stats"]["unique_graphs"])
        shapes.append((tuple(group[0].src.shape), tuple(group[0].tgt.shape)))
        return update

    monkeypatch.setattr(train_module, "train_update", counting_update)
    torch._dynamo.reset()
    counters.clear()


@pytest.fixture(scope="module")
def multi30k_small_vocab(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Multi30k en-de with a vocabulary of 1,000 pieces: an epoch of it trains several times
    faster than with the default 8,000, whose output layer and loss take most of a tiny model's
    step; its longest sentence has 94 pieces."""
    out = tmp_path_factory.mktemp("prepared") / "multi30k.en-de"
    return prepare("multi30k", "en", "de", out, mirror=str(shared_data), vocab_size=1000)


@pytest.mark.slow
def test_bucketed_training_compiles_once_per_bucket_over_an_epoch(
    multi30k_small_vocab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole epoch of Multi30k with the GPU recipe's length buckets, batches made on the
    device and the fused optimizer: every batch has one of at most len(buckets) shapes, and the
    model is compiled once per shape (dynamic=False), the graphs of the first step times the
    shapes seen, within Dynamo's recompile_limit."""
    graphs_after_step: list[int] = []
    shapes: list[tuple] = []
    counting_graphs(monkeypatch, graphs_after_step, shapes)
    overrides = compiled_run_overrides("transformer", multi30k_small_vocab, tmp_path / "run")
    overrides += [f"train.max_tokens={EPOCH_TOKENS}", "train.max_steps=0", "train.max_epochs=1"]
    overrides += ["data.vocab_size=1000"]
    overrides += ["train.data_on_device=true", "train.fused_optimizer=true"]
    # the recipe's buckets, the longest made room for the longer pieces of a smaller vocabulary
    buckets = (*load_config(GPU_RECIPE).train.length_buckets[:-1], 128)
    cfg = load_config(None, [*overrides, f"train.length_buckets={list(buckets)}"])
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
        progress = train_module.train(cfg)

    assert progress.epoch == 1 and len(graphs_after_step) == progress.step
    assert {src for src, _ in shapes} <= {(EPOCH_TOKENS // b, b) for b in buckets}
    assert all(src == tgt for src, tgt in shapes)
    assert graphs_after_step[-1] == graphs_after_step[0] * len(set(shapes))


def assert_same_batch(made: Batch, expected: Batch) -> None:
    for name in ("src", "src_lens", "tgt", "tgt_lens", "indices"):
        got, want = getattr(made, name), getattr(expected, name)
        assert got.dtype == want.dtype and torch.equal(got, want), name
    assert (made.num_tgt_tokens, made.num_src_tokens) == (
        expected.num_tgt_tokens,
        expected.num_src_tokens,
    )


@pytest.mark.parametrize("buckets", [(), (4, 8, 16)])
def test_batches_made_on_the_device_equal_those_made_on_the_host(buckets: tuple) -> None:
    """train.data_on_device: every batch of two shuffled epochs, gathered from the corpus on
    the device, equals the host's `collate` (or `BucketCollate`) of the same rows, rows of no
    piece and filler rows included."""
    rng = np.random.default_rng(0)
    ids = [rng.integers(4, VOCAB, size=rng.integers(0, 14)).tolist() for _ in range(300)]
    dataset = ParallelDataset.from_ids(ids, [[*row[::-1], 5] for row in ids])
    src_lens, tgt_lens = dataset.src_lens, dataset.tgt_lens
    host_collate = BucketCollate(buckets, 64) if buckets else collate
    if buckets:
        src_lens = tgt_lens = bucket_lengths(np.maximum(src_lens, tgt_lens), buckets)
    sampler = TokenBatchSampler(src_lens, tgt_lens, 64, seed=3)
    corpus = DeviceCorpus(dataset, torch.device("cpu"), buckets, 64)
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        for indices in sampler:
            assert_same_batch(corpus.batch(indices), host_collate([dataset[i] for i in indices]))


@pytest.mark.parametrize("arch", ["transformer", "gru"])
def test_bucket_padding_leaves_the_loss_unchanged(arch: str) -> None:
    """The filler rows and the padding up to the bucket change no real row's loss."""
    model = tiny_model(arch).eval()
    rng = np.random.default_rng(0)
    ids = [rng.integers(4, VOCAB, size=n).tolist() for n in (3, 9, 5, 1)]
    dataset = ParallelDataset.from_ids(ids, [[*row, 5] for row in ids])
    examples = [dataset[i] for i in range(len(dataset))]
    plain, bucketed = collate(examples), BucketCollate((8, 16), 128)(examples)
    assert bucketed.src.shape == bucketed.tgt.shape == (8, 16)
    with torch.no_grad():
        expected = token_losses(model, plain, 0.1, None, cross_entropy_of(model))
        padded = token_losses(model, bucketed, 0.1, None, cross_entropy_of(model))
    torch.testing.assert_close(padded, expected)


@pytest.mark.parametrize("arch", ["transformer", "gru"])
def test_validation_in_one_large_batch_translates_as_in_small_ones(
    arch: str, reversal: Path
) -> None:
    """train.valid_batch_tokens: the valid set decoded (beam 5) in one batch of 100 sentences
    gives the translations and scores of batches of a few sentences. The model is untrained:
    its output is long and varied, every sentence's search its own."""
    data = PreparedData.load(reversal)
    sources = data.lines("valid")[0]
    model = tiny_model(arch, vocab_size=data.tgt_tokenizer.vocab_size).eval()
    results = []
    for budget in (500, 1_000_000):
        overrides = ["decode.batch_size=1024", f"train.valid_batch_tokens={budget}"]
        cfg = load_config(None, [*overrides, 'decode.precision="fp32"'])
        translator = validation_translator(cfg, model, data, torch.device("cpu"))
        assert translator.languages == (cfg.data.src, cfg.data.tgt)  # for decode.keep_numbers
        sizes: list[int] = []
        best = [nbest[0] for nbest in translator.translate(sources, 5, on_batch=sizes.append)]
        results.append((sizes, [t.tokens for t in best], [t.score for t in best]))
    (small_sizes, small_tokens, small_scores), (large_sizes, large_tokens, large_scores) = results
    assert large_sizes == [len(sources)] and len(small_sizes) >= 10
    assert large_tokens == small_tokens and len({len(t) for t in large_tokens}) > 3
    assert large_scores == pytest.approx(small_scores, abs=1e-5)


def test_fused_adamw_steps_as_the_default_one() -> None:
    """train.fused_optimizer=true: AdamW(fused=True) takes the same steps as PyTorch's default
    (foreach) implementation, given the same gradients, to float32 rounding. (Gradients of a
    model are not compared: those that are zero but for rounding, such as a key bias's, make
    Adam's steps of +-lr differ.)"""
    generator = torch.Generator().manual_seed(0)
    start = [torch.randn(shape, generator=generator) for shape in ((16, 8), (8,))]
    grads = [[torch.randn(p.shape, generator=generator) for p in start] for _ in range(3)]
    weights = []
    for fused in (None, True):
        params = [torch.nn.Parameter(p.clone()) for p in start]
        optimizer = torch.optim.AdamW(params, lr=1e-2, betas=(0.9, 0.98), fused=fused)
        for step_grads in grads:
            for param, grad in zip(params, step_grads, strict=True):
                param.grad = grad.clone()
            optimizer.step()
        weights.append([p.detach() for p in params])
    torch.testing.assert_close(weights[0], weights[1])
    assert not torch.equal(weights[0][0], start[0])


@pytest.mark.slow
def test_the_gpu_recipe_runs_on_a_cpu(reversal: Path, tmp_path: Path) -> None:
    """configs/transformer.multi30k.en-de.gpu.toml as it is, but on a CPU with a tiny model
    and uncompiled (inductor takes minutes on a CPU): it starts, steps, validates and saves."""
    run_dir = tmp_path / "run"
    overrides = [
        *tiny_overrides("transformer", reversal, run_dir),
        'train.device="cpu"',
        'train.precision="fp32"',
        "train.compile=false",
        "train.max_steps=3",
        "train.warmup_steps=1",  # the linear schedule's decay needs steps after its warmup
        "train.valid_every=2",
        "train.valid_max_sentences=8",
    ]
    cfg = load_config(GPU_RECIPE, overrides)
    assert cfg.train.length_buckets and cfg.train.fused_optimizer  # the recipe's own keys
    progress = train_module.train(cfg)
    assert progress.step == 3
    assert [entry["step"] for entry in progress.history] == [2, 3]
    assert {p.name for p in run_dir.glob("*.pt")} >= {"best.pt", "last.pt", "step-2.pt"}


SPEEDRUN = GPU_RECIPE.with_name("transformer.multi30k.en-de.speedrun.toml")


def test_the_speedrun_meets_at_most_one_shape_per_bucket_the_same_each_epoch(
    multi30k_en_de: Path,
) -> None:
    """configs/transformer.multi30k.en-de.speedrun.toml compiles its model with dynamic=False,
    so its graphs are those of one step times the batch shapes training meets (counted by
    test_bucketed_training_compiles_once_per_bucket_over_an_epoch). Here those shapes, from the
    training code's own batches over two whole epochs of the real Multi30k en-de: at most one
    (max_tokens // L, L) per bucket L, both sides alike, and every epoch the same ones, so the
    timed runs find every shape compiled by benchmarks/speedrun.py's untimed epoch. 7 of the 8
    buckets are met: the rows of 33-40 tokens share their batches with longer ones. Counted,
    not compiled: inductor takes minutes a shape on a CPU."""
    cfg = load_config(SPEEDRUN, [f'data.prepared="{multi30k_en_de}"', 'train.device="cpu"'])
    data = PreparedData.load(multi30k_en_de)
    run = SimpleNamespace(
        cfg=cfg, env=Dist(), train_set=data.dataset("train"), device=torch.device("cpu")
    )
    sampler, epoch_batches = train_module.training_batches(run)
    epochs = []
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        epochs.append([(tuple(b.src.shape), tuple(b.tgt.shape)) for b in epoch_batches()])
    train = cfg.train
    assert train.compile and train.data_on_device and len(epochs[0]) == len(sampler)
    assert sorted(epochs[0]) == sorted(epochs[1]) and epochs[0] != epochs[1]  # shuffled
    shapes = {src for src, _ in epochs[0]}
    assert shapes < {(train.max_tokens // length, length) for length in train.length_buckets}
    assert len(shapes) == 7 and all(src == tgt for src, tgt in epochs[0])
