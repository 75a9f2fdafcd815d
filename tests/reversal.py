"""A generated translation task for tests: reverse a random sequence of letters.

"a c b d" -> "d b c a". A correct tiny model masters it in seconds, so tests can demand
near-perfect BLEU from real training and decoding.
"""

import os
import random
import sys
from pathlib import Path

import torch

from seq2seq.checkpoints import load_checkpoint
from seq2seq.data.corpora import UserFiles
from seq2seq.data.prepare import prepare

LETTERS = "abcdefghijklmnop"
# `seq2seq train` needs a --config: this one leaves every value at its default, and the tests
# set what they need with overrides (tiny_overrides).
DEFAULTS = Path(__file__).with_name("defaults.toml")
TRAIN = [sys.executable, "-m", "seq2seq", "train", "--config", str(DEFAULTS)]
# For TRAIN: its lines as they come, on one OpenMP thread. conftest.py sets that for the tests
# and the commands they start, but imports this module, and so makes this copy, before it does.
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}


def write_reversal_corpus(folder: Path, sizes: dict[str, int], seed: int = 0) -> Path:
    """Write `{split}.src` / `{split}.tgt` files with `sizes[split]` pairs each."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for split, size in sizes.items():
        sources, targets = [], []
        for _ in range(size):
            letters = [rng.choice(LETTERS) for _ in range(rng.randint(3, 8))]
            sources.append(" ".join(letters))
            targets.append(" ".join(reversed(letters)))
        (folder / f"{split}.src").write_text("\n".join(sources) + "\n", encoding="utf-8")
        (folder / f"{split}.tgt").write_text("\n".join(targets) + "\n", encoding="utf-8")
    return folder


def prepare_reversal(folder: Path, sizes: dict[str, int] | None = None) -> Path:
    """A prepared folder (sentencepiece included) for the reversal task, inside `folder`."""
    sizes = sizes or {"train": 3000, "valid": 100, "test": 200}
    raw = write_reversal_corpus(folder / "raw", sizes)
    files = UserFiles.from_options("src", "tgt", str(raw), {})
    return prepare(
        "files", "src", "tgt", folder / "prepared", vocab_size=32, byte_fallback=False, files=files
    )


def tiny_overrides(arch: str, prepared: Path, run_dir: Path) -> list[str]:
    """Configuration overrides for a tiny model of `arch` that learns reversal quickly."""
    model = {
        "transformer": [
            "model.name=transformer-tiny",
            "model.embed_dim=64",
            "model.ffn_size=128",
            "model.encoder_layers=2",
            "model.decoder_layers=2",
        ],
        "gru": ["model.name=gru", "model.embed_dim=32", "model.hidden_size=64"],
    }[arch]
    return [
        *model,
        "model.dropout=0.0",
        f'data.prepared="{prepared}"',
        "data.vocab_size=32",
        f'train.run_dir="{run_dir}"',
        "train.max_tokens=2048",
        "train.lr=0.005",
        "train.warmup_steps=100",
        "train.label_smoothing=0.0",
        "train.log_every=50",
        # no TensorBoard attention images: drawing them takes most of a tiny run's validation
        # (test_tensorboard_holds_scalars_attention_images_and_text asks for them)
        "train.attention_samples=0",
    ]


def assert_resumed_exactly(whole: Path, resumed: Path, step: int) -> tuple[dict, dict]:
    """The last.pt of a run that was interrupted and resumed equals that of the uninterrupted
    run: the step, every weight and the progress record (but its train_loss: the loss of the
    last log line, which the bar shows, written by time too). Returns both checkpoints."""
    a, b = load_checkpoint(whole / "last.pt"), load_checkpoint(resumed / "last.pt")
    assert a["step"] == b["step"] == step
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name
    progress_a, progress_b = (dict(c["training"]["progress"]) for c in (a, b))
    assert progress_a.pop("train_loss") is not None and progress_b.pop("train_loss") is not None
    assert progress_a == progress_b
    return a, b
