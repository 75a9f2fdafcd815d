"""No training step waits for the device. A GPU runs behind the host: each read of a GPU
tensor to the host (`.item()`, `.tolist()`, `float(t)`, `bool(t)`, `if t:`, `.cpu()`, an index
by a boolean mask) makes the host wait until the GPU has caught up, and the GPU then idles while
the host prepares the next step. With train.fused_optimizer (the GPU recipe), the loop reads the
device only at its log lines, validations and saves.

Checked on a CPU, as `torch.cuda.set_sync_debug_mode` would on a GPU: a dispatch mode counts the
operators that hand a value to the host (item, bool, float and int of a tensor all end in
`_local_scalar_dense`; nonzero and masked_select must know their output's size), and the
methods that read a tensor's values without an operator are patched to count their calls."""

from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import torch
from reversal import tiny_overrides
from torch.utils._python_dispatch import TorchDispatchMode

from seq2seq.config_file import load_config
from seq2seq.data.batching import Batch
from seq2seq.training import loop as train_module
from seq2seq.training.run import Run
from seq2seq.training.step import Update

aten = torch.ops.aten
HOST_READING_OPERATORS = {
    aten._local_scalar_dense.default,
    aten.nonzero.default,
    aten.masked_select.default,
}
HOST_READING_METHODS = ("tolist", "numpy", "cpu")
STEPS, LOG_EVERY = 25, 10


class ReadCounter(TorchDispatchMode):
    """Counts the reads of tensors to the host, and where each training update began."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.reads_before_update: list[int] = []  # the reads counted when update i + 1 began

    def counts(self, func: Any, args: tuple) -> bool:
        """Whether the call of operator `func` on `args` is one this counter counts."""
        return func in HOST_READING_OPERATORS

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        self.reads += self.counts(func, args)
        return func(*args, **(kwargs or {}))

    def counting(self, method: Callable) -> Callable:
        def counted(*args: object, **kwargs: object) -> object:
            self.reads += 1
            return method(*args, **kwargs)

        return counted

    def reads_per_step(self) -> dict[int, int]:
        """{step: reads from the start of its update to the start of the next one}; the last
        step, which validates and saves, is left out."""
        marks = self.reads_before_update
        return {step: b - a for step, (a, b) in enumerate(pairwise(marks), 1)}


def count_reads(
    fused: bool, reversal: Path, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[int, int]:
    """Train a tiny Transformer on the CPU for STEPS steps, logging every LOG_EVERY; returns
    the reads of each step but the last."""
    counter = ReadCounter()
    real_update = train_module.train_update

    def marked_update(run: Run, group: list[Batch], step: int) -> Update | None:
        counter.reads_before_update.append(counter.reads)
        return real_update(run, group, step)

    overrides = [
        *tiny_overrides("transformer", reversal, run_dir),
        'train.device="cpu"',
        'train.precision="fp32"',
        f"train.fused_optimizer={str(fused).lower()}",
        "train.max_tokens=512",  # 25 steps in one epoch: no new DataLoader iterator
        f"train.max_steps={STEPS}",
        f"train.valid_every={STEPS}",
        f"train.log_every={LOG_EVERY}",
        "train.log_every_seconds=0",
        "train.save_every_minutes=0",
        "train.valid_max_sentences=4",
        "train.attention_samples=0",
    ]
    cfg = load_config(None, overrides)
    monkeypatch.setattr(train_module, "train_update", marked_update)
    for name in HOST_READING_METHODS:
        monkeypatch.setattr(torch.Tensor, name, counter.counting(getattr(torch.Tensor, name)))
    with counter:
        progress = train_module.train(cfg)
    monkeypatch.undo()
    assert progress.step == STEPS
    return counter.reads_per_step()


@pytest.mark.slow  # trains for seconds
def test_steps_between_log_lines_read_nothing_from_the_device(
    reversal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Steps 2-24 of 25, logging every 10: one read at steps 10 and 20, all the window's
    figures at once, and none at the others. (Step 1 also logs its first attention maps, and
    step 25 validates: both read more.)"""
    reads = count_reads(True, reversal, tmp_path / "run", monkeypatch)
    assert reads[1] > 0
    del reads[1]
    log_steps = range(LOG_EVERY, STEPS, LOG_EVERY)
    assert reads == {step: int(step in log_steps) for step in range(2, STEPS)}


@pytest.mark.slow  # trains for seconds
def test_without_the_fused_optimizer_each_step_reads_its_loss(
    reversal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counter sees what it must: the host checks each update's loss and gradient norm
    (2 reads) before it steps. (PyTorch's default AdamW reads each weight's step count on the
    host too: 91 reads a step in all for this model.)"""
    reads = count_reads(False, reversal, tmp_path / "run", monkeypatch)
    assert all(n >= 2 for n in reads.values()), reads
