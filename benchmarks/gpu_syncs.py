#!/usr/bin/env python3
"""Count the times each training step makes the host wait for the GPU.

    benchmarks/gpu_syncs.py --config CONFIG --out syncs.json [KEY=VALUE ...]

Trains CONFIG (with the overrides) under `torch.cuda.set_sync_debug_mode("warn")`, which warns
at every operation that waits for the GPU (a tensor read to the host, a blocking copy, a stream
synchronisation), and writes as JSON the warnings of each step, from the start of its update to
the start of the next (the last step, which validates and saves, is left out), the steps that
wrote a log line, and the most any other step had. With the GPU recipe the steps between log
lines must have none (docs/training.md, "Training fast on a GPU"; tests/test_host_sync.py checks
the same on a CPU). On a CPU nothing waits and every count is 0: a check that this runs.
"""

import warnings
from itertools import pairwise
from pathlib import Path

import torch
from measure import gpu_name, sync_warnings, syncs_in, write_record

from seq2seq.commands.cli import ArgumentParser, run_cli
from seq2seq.config import Config
from seq2seq.config_file import load_config
from seq2seq.data.batching import Batch
from seq2seq.training import loop
from seq2seq.training.run import Run
from seq2seq.training.step import Update


class MarkedUpdates:
    """`loop.train_update`, noting how many warnings had come when each update began."""

    def __init__(self, caught: list[warnings.WarningMessage]) -> None:
        self.caught, self.marks = caught, []
        self.update = loop.train_update

    def __call__(self, run: Run, group: list[Batch], step: int) -> Update | None:
        self.marks.append(len(self.caught))
        return self.update(run, group, step)

    def syncs_per_step(self) -> list[int]:
        """The synchronisation warnings from the start of each update to the next."""
        return [syncs_in(self.caught[a:b]) for a, b in pairwise(self.marks)]


def count_syncs(cfg: Config) -> list[int]:
    """Train `cfg` with `loop.train_update` marked; the synchronisations of each step."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with sync_warnings(device) as caught:
        marked = MarkedUpdates(caught)
        loop.train_update = marked
        try:
            loop.train(cfg)
        finally:
            loop.train_update = marked.update
    return marked.syncs_per_step()


def main() -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the training configuration file")
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    args = parser.parse_args()
    cfg = load_config(args.config, args.overrides)
    syncs = count_syncs(cfg)
    log_every = cfg.train.log_every
    logged = [step for step in range(1, len(syncs) + 1) if step == 1 or step % log_every == 0]
    others = [n for step, n in enumerate(syncs, 1) if step not in logged]
    record = {
        "config": args.config,
        "overrides": args.overrides,
        "device": gpu_name(torch.device("cuda" if torch.cuda.is_available() else "cpu")),
        "steps_that_logged": logged,
        "syncs_per_step": syncs,
        "most_between_log_lines": max(others, default=0),
    }
    write_record(record, args.out)
    print(f"host synchronisations between log lines: at most {record['most_between_log_lines']}")


if __name__ == "__main__":
    run_cli(main)
