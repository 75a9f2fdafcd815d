#!/usr/bin/env python3
"""Write the record of `benchmarks/gpu.sh` from the files its steps left in one folder.

    benchmarks/gpu_report.py WORK_DIR [--out-dir results/bench] [--command CMD] [--steps N]

WORK_DIR holds `bench.json` (benchmarks/bench.py), `run/` (the training run, its TensorBoard
events), `start` and `end` (Unix times around training), `decode-beam5.json` and
`decode-beam1.json` (seq2seq evaluate --json) and, on a GPU, `memory.csv` (nvidia-smi's
memory.used in MiB, sampled every 0.5 s). The record, `gpu-<device>-<time>.json`, holds:

- time to a valid BLEU of 35 and of 40: seconds from the training command's start to the first
  validation at or above it (start-up, data loading and validations included), or null;
- the training run's mean target tokens/s and the device memory it used at its peak;
- each preset's training throughput and peak memory from bench.py;
- test-set decoding of the best checkpoint: sentences/s and BLEU with beam 5 and greedy.
"""

import json
import statistics
from pathlib import Path
from typing import Any

from bench import bench_path
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seq2seq.commands.cli import ArgumentParser, number, run_cli
from seq2seq.config_rules import AT_LEAST_0
from seq2seq.errors import UserError

BLEU_TARGETS = (35.0, 40.0)


def read_scalars(run_dir: Path) -> dict[str, list[tuple[float, int, float]]]:
    """Every scalar of the run as tag -> [(wall time, step, value)]."""
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return {
        tag: [(e.wall_time, e.step, e.value) for e in events.Scalars(tag)]
        for tag in events.Tags()["scalars"]
    }


def time_to_bleu(
    validations: list[tuple[float, int, float]], start: float
) -> dict[str, dict[str, float] | None]:
    """For each target, the first validation reaching it: seconds since `start` and step."""
    reached: dict[str, dict[str, float] | None] = {}
    for target in BLEU_TARGETS:
        first = next(((t, s, v) for t, s, v in validations if v >= target), None)
        reached[f"{target:g}"] = (
            None
            if first is None
            else {"seconds": round(first[0] - start, 1), "step": first[1], "bleu": first[2]}
        )
    return reached


def peak_device_memory(csv: Path) -> float | None:
    """The largest memory.used sample in MiB (the whole device: CUDA context included)."""
    if not csv.is_file():
        return None
    samples = [float(line) for line in csv.read_text().split() if line.strip()]
    return max(samples) if samples else None


def decoding(summary: dict[str, Any]) -> dict[str, Any]:
    keys = ("sentences", "seconds", "sentences_per_second", "bleu", "chrf", "beam_size")
    return {key: summary.get(key) for key in keys}


def report(work: Path, command: str, steps: int) -> dict[str, Any]:
    bench = json.loads((work / "bench.json").read_text())
    start = float((work / "start").read_text())
    end = float((work / "end").read_text())
    scalars = read_scalars(work / "run")
    validations = scalars.get("valid/bleu", [])
    tokens_per_second = [v for _, _, v in scalars.get("train/tgt_tokens_per_second", [])]
    return {
        "kind": "gpu",
        "environment": {**bench["environment"], "command": command},
        "training_run": {
            "config": "configs/transformer.multi30k.en-de.toml",
            "changes": ["decode.valid_beam_size=5", "train.valid_every=500"],
            "max_steps": steps,
            "steps": max((s for _, s, _ in validations), default=0),
            "seconds": round(end - start, 1),
            "time_to_valid_bleu": time_to_bleu(validations, start),
            "valid_bleu": [(s, round(v, 2)) for _, s, v in validations],
            "tgt_tokens_per_second": (
                statistics.median(tokens_per_second) if tokens_per_second else None
            ),
            "peak_device_memory_mib": peak_device_memory(work / "memory.csv"),
        },
        "throughput": [
            {
                "name": model["name"],
                "parameters": model["parameters"],
                "precision": model["training"]["precision"],
                "tgt_tokens_per_second": model["training"]["tgt_tokens_per_second"],
                "memory": model["training"]["memory"],
            }
            for model in bench["models"]
        ],
        "decoding": {
            f"beam{beam}": decoding(json.loads((work / f"decode-beam{beam}.json").read_text()))
            for beam in (5, 1)
        },
    }


def main() -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path, help="the folder gpu.sh wrote its steps' files into")
    parser.add_argument("--out-dir", type=Path, default=Path("results/bench"))
    parser.add_argument("--command", default="bash benchmarks/gpu.sh")
    parser.add_argument(
        "--steps", type=number(int, AT_LEAST_0), default=0, help="train.max_steps of the run"
    )
    args = parser.parse_args()
    if not args.work.is_dir():
        raise UserError(f"{args.work}: not a folder written by benchmarks/gpu.sh")
    try:
        record = report(args.work, args.command, args.steps)
    except (OSError, KeyError, ValueError) as err:
        raise UserError(f"{args.work}: incomplete benchmark folder ({err!r})") from None
    out = args.out_dir / bench_path("gpu-", record["environment"]["device_name"]).name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    run = record["training_run"]
    print(f"wrote {out}")
    print(f"time to valid BLEU: {json.dumps(run['time_to_valid_bleu'])}")
    print(
        f"training: {run['tgt_tokens_per_second']} target tokens/s, "
        f"peak device memory {run['peak_device_memory_mib']} MiB"
    )
    for name, figures in record["decoding"].items():
        print(
            f"decoding {name}: {figures['sentences_per_second']:.1f} sentences/s, "
            f"BLEU {figures['bleu']:.2f}"
        )


if __name__ == "__main__":
    run_cli(main)
