"""What a run writes for people to read: a plain-text log and TensorBoard event files.

Only the main rank of a distributed run logs; the others get a logger that writes nothing.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

if TYPE_CHECKING:  # matplotlib is imported where figures are drawn (attention_maps.py)
    from matplotlib.figure import Figure

FLUSH_SECONDS = 30  # TensorBoard events reach the file at least this often (its default: 120)


class RunLog:
    """Writes `train.log` and TensorBoard events into the run folder.

    `purge_step` (the step a resumed run restarts from) drops events an interrupted run wrote
    after its last checkpoint, so curves have no doubled segments.
    """

    def __init__(self, run_dir: Path, enabled: bool, purge_step: int | None = None) -> None:
        self.enabled = enabled
        self.writer = (
            SummaryWriter(str(run_dir), purge_step=purge_step, flush_secs=FLUSH_SECONDS)
            if enabled
            else None
        )
        self.log_file = open(run_dir / "train.log", "a", encoding="utf-8") if enabled else None  # noqa: SIM115

    def line(self, message: str, echo: bool = True) -> None:
        """A timestamped line in train.log, also printed unless not `echo` (through tqdm, so
        bars stay intact).

        The file comes first: when standard output is a pipe whose reader has gone (`make train
        | cat > log` and Ctrl-C, which ends `cat` too), printing fails, and the run goes on with
        its output sent to /dev/null, logging to train.log alone."""
        if not self.enabled:
            return
        stamped = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}"
        self.log_file.write(stamped + "\n")
        self.log_file.flush()
        if echo:
            try:
                tqdm.write(stamped)
                sys.stdout.flush()  # each line as it comes, also into a pipe
            except BrokenPipeError:
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

    def scalars(self, step: int, values: dict[str, float]) -> None:
        if self.enabled:
            for tag, value in values.items():
                self.writer.add_scalar(tag, value, step)

    def text(self, step: int, tag: str, markdown: str) -> None:
        if self.enabled:
            self.writer.add_text(tag, markdown, step)

    def figure(self, step: int, tag: str, figure: Figure) -> None:
        if self.enabled:
            self.writer.add_figure(tag, figure, step, close=True)

    def flush(self) -> None:
        if self.enabled:
            self.writer.flush()

    def close(self) -> None:
        if self.enabled:
            self.writer.close()
            self.log_file.close()
