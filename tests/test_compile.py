"""train.compile=true over real training: batches of varying size and lengths must not make
torch.compile recompile the model again and again. Checked on a CPU with Dynamo's "eager"
backend, which captures the same graphs as the default (inductor) and only skips generating
their kernels."""

from functools import partial
from pathlib import Path

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

from seq2seq.config import load_config
from seq2seq.data.batching import Batch
from seq2seq.training import loop as train_module
from seq2seq.training.run import Run

STEPS = 200

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

    def counting_update(run: Run, group: list[Batch]) -> train_module.Update | None:
        update = real_update(run, group)
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
