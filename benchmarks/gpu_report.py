#!/usr/bin/env python3
"""Write the record of `benchmarks/gpu.sh` from the files its steps left in one folder.

    benchmarks/gpu_report.py WORK_DIR [--out-dir results/bench] [--command CMD] [--config F]
                             [--test-target BLEU]
    benchmarks/gpu_report.py WORK_DIR --first-step-at BLEU    # the step gpu.sh decodes again

WORK_DIR holds `bench.json` (benchmarks/bench.py), `run/` (the training run: its TensorBoard
events, config.toml and every validation's checkpoint), `start` and `end` (Unix times around
training), `tested` (the Unix time the beam-5 test score was written), `decode-beam5.json` and
`decode-beam1.json` (seq2seq evaluate --json), `decode-first.json` (the beam-5 test score of
the first checkpoint at the test target, when a validation reached it) between the Unix times
`first-start` and `first-end`, `syncs.json` (benchmarks/gpu_syncs.py), `decode.json`
(benchmarks/gpu_decode.py), `profile.json` (benchmarks/gpu_profile.py; missing in older
folders, or when the profile failed), and, on a GPU, `memory.csv` (nvidia-smi's memory.used
in MiB, sampled every 0.5 s). The record, `gpu-<device>-<time>.json`, holds:

- time to a valid BLEU of 35 and of 40: seconds from the training command's start to the first
  validation at or above it (start-up, data loading and validations included), or null; and
  the seconds from that start to the beam-5 test score (training and test decoding);
- time to a test BLEU: the first checkpoint whose valid BLEU reached the test target (40), its
  test BLEU, and the seconds from the training command's start to its validation plus those of
  the command that decoded the test set with it (a process of its own: start-up included);
- the training run's median target tokens/s, its model FLOPs utilisation (`model_flops`) and
  the device memory it used at its peak;
- the host synchronisations of each training step (benchmarks/gpu_syncs.py), and the most
  that a step between log lines had;
- each preset's training throughput and peak memory from bench.py;
- test-set decoding of the best checkpoint: sentences/s and BLEU with beam 5 and greedy;
- the same decoding warm (`warm_decoding`): sentences/s with beam 1 and 5, the host
  synchronisations of each decoding step and their mean, and on a GPU the textbook searches'
  sentences/s on 200 sentences for comparison;
- the profile of a training step and of a decoding step (`profile`, null without
  profile.json): their wall time, the GPU's busy time, kernel launches and aten operators per
  step, and the operators that take the most time (benchmarks/gpu_profile.py).
"""

import json
import statistics
import time
import tomllib
from pathlib import Path
from typing import Any

from gpu_profile import summary_line
from measure import bench_path, write_record
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seq2seq.checkpoints import load_checkpoint
from seq2seq.commands.cli import ArgumentParser, run_cli
from seq2seq.decoding.model_result import git_state
from seq2seq.errors import UserError

BLEU_TARGETS = (35.0, 40.0)
# Dense bf16 peak FLOP/s (without 2:4 sparsity) of NVIDIA's data sheets, by a part of the name
# torch.cuda.get_device_name gives; a card missing here gets no utilisation.
BF16_PEAK_FLOPS = {
    "H100 80GB HBM3": 989e12,  # H100 SXM
    "H100 PCIe": 756e12,
    "H100 NVL": 835e12,
    "H200": 989e12,
    "A100": 312e12,
}
FLOPS_FORMULA = (
    "6 * (P_encoder * source tokens/s + P_decoder * target tokens/s): forward and backward of "
    "each weight once per token it reads; P_encoder: the weights whose name starts with "
    "'encoder', P_decoder: every other weight but the embedding tables (the output projection "
    "included). Attention's scores and weighted sums are left out (12 * d_model * length per "
    "token and layer: under 3% for Multi30k's lengths)"
)


def read_scalars(run_dir: Path) -> dict[str, list[tuple[float, int, float]]]:
    """Every scalar of the run as tag -> [(wall time, step, value)]."""
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return {
        tag: [(e.wall_time, e.step, e.value) for e in events.Scalars(tag)]
        for tag in events.Tags()["scalars"]
    }


def first_at(
    validations: list[tuple[float, int, float]], bleu: float
) -> tuple[float, int, float] | None:
    """The first of the (wall time, step, BLEU) validations at or above `bleu`, or None."""
    return next((v for v in validations if v[2] >= bleu), None)


def time_to_bleu(
    validations: list[tuple[float, int, float]], start: float
) -> dict[str, dict[str, float] | None]:
    """For each target, the first validation reaching it: seconds since `start` and step."""
    reached: dict[str, dict[str, float] | None] = {}
    for target in BLEU_TARGETS:
        first = first_at(validations, target)
        reached[f"{target:g}"] = (
            None
            if first is None
            else {"seconds": round(first[0] - start, 1), "step": first[1], "bleu": first[2]}
        )
    return reached


def time_to_test_bleu(
    work: Path, validations: list[tuple[float, int, float]], start: float, target: float
) -> dict[str, float] | None:
    """The test score of the first checkpoint at a valid BLEU of `target` (decode-first.json),
    and the seconds from `start` to its validation plus those of the command that decoded the
    test set with it; None when no validation reached `target`."""
    first = first_at(validations, target)
    if first is None:
        return None
    started, ended = (float((work / name).read_text()) for name in ("first-start", "first-end"))
    test = json.loads((work / "decode-first.json").read_text())
    return {
        "valid_bleu_target": target,
        "step": first[1],
        "valid_bleu": round(first[2], 2),
        "test_bleu": test["bleu"],
        "seconds": round(first[0] - start + ended - started, 1),
        "test_decoding_command_seconds": round(ended - started, 1),
    }


def peak_device_memory(csv: Path) -> float | None:
    """The largest memory.used sample in MiB (the whole device: CUDA context included)."""
    if not csv.is_file():
        return None
    samples = [float(line) for line in csv.read_text().split() if line.strip()]
    return max(samples) if samples else None


def weights_per_token(checkpoint: Path) -> tuple[int, int]:
    """(P_encoder, P_decoder) of FLOPS_FORMULA, counted in the checkpoint's weights (a tied
    output projection counted as the decoder's, its embedding table left out)."""
    weights = load_checkpoint(checkpoint)["model"]
    encoder = sum(w.numel() for name, w in weights.items() if name.startswith("encoder"))
    not_decoder = ("encoder", "src_embed", "tgt_embed")
    decoder = sum(w.numel() for name, w in weights.items() if not name.startswith(not_decoder))
    return encoder, decoder


def model_flops(
    checkpoint: Path, tgt_per_second: float, tokens_per_second: float, device_name: str
) -> dict[str, Any]:
    """Achieved model FLOP/s of training (FLOPS_FORMULA) and its share of the device's bf16
    peak (null for a device missing from BF16_PEAK_FLOPS)."""
    encoder, decoder = weights_per_token(checkpoint)
    achieved = 6 * (encoder * (tokens_per_second - tgt_per_second) + decoder * tgt_per_second)
    peak = next((f for name, f in BF16_PEAK_FLOPS.items() if name in device_name), None)
    return {
        "formula": FLOPS_FORMULA,
        "encoder_weights": encoder,
        "decoder_weights": decoder,
        "achieved_flops_per_second": achieved,
        "bf16_peak_flops_per_second": peak,
        "utilisation": achieved / peak if peak else None,
    }


def median_scalar(scalars: dict[str, list[tuple[float, int, float]]], tag: str) -> float | None:
    values = [v for _, _, v in scalars.get(tag, [])]
    return statistics.median(values) if values else None


def decoding(summary: dict[str, Any]) -> dict[str, Any]:
    keys = ("sentences", "seconds", "sentences_per_second", "bleu", "chrf", "beam_size")
    return {key: summary.get(key) for key in keys}


def read_profile(path: Path) -> dict[str, Any] | None:
    """benchmarks/gpu_profile.py's record, or None where gpu.sh wrote none."""
    return json.loads(path.read_text()) if path.is_file() else None


def report(
    work: Path, command: str, config: str, test_target: float, train_args: list[str]
) -> dict[str, Any]:
    bench = json.loads((work / "bench.json").read_text())
    start = float((work / "start").read_text())
    end = float((work / "end").read_text())
    tested = float((work / "tested").read_text())
    scalars = read_scalars(work / "run")
    validations = scalars.get("valid/bleu", [])
    tgt_per_second = median_scalar(scalars, "train/tgt_tokens_per_second")
    tokens_per_second = median_scalar(scalars, "train/tokens_per_second")
    device_name = bench["environment"]["device_name"]
    configuration = (work / "run" / "config.toml").read_text(encoding="utf-8")
    flops = None
    if tgt_per_second and tokens_per_second:
        best = work / "run" / "best.pt"
        flops = model_flops(best, tgt_per_second, tokens_per_second, device_name)
    revision, dirty = git_state()
    here = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": command,
        "git_revision": revision,
        "git_dirty": dirty,
    }
    return {
        "kind": "gpu",
        "environment": {**bench["environment"], **here},
        # steps 1 and 2 (throughput, host_syncs): this run's, or an earlier one's (RESUME=1)
        "throughput_run": {key: bench["environment"][key] for key in ("created", "git_revision")},
        "training_run": {
            "config": config,
            "changes": ["decode.valid_beam_size=5", "train.keep_last=1000", *train_args],
            "configuration": configuration,
            "max_steps": tomllib.loads(configuration)["train"]["max_steps"],
            "steps": max((s for _, s, _ in validations), default=0),
            "seconds": round(end - start, 1),
            "time_to_valid_bleu": time_to_bleu(validations, start),
            "seconds_to_test_score": round(tested - start, 1),
            "time_to_test_bleu": time_to_test_bleu(work, validations, start, test_target),
            "valid_bleu": [(s, round(v, 2)) for _, s, v in validations],
            "tgt_tokens_per_second": tgt_per_second,
            "tokens_per_second": tokens_per_second,
            "model_flops": flops,
            "peak_device_memory_mib": peak_device_memory(work / "memory.csv"),
        },
        "host_syncs": json.loads((work / "syncs.json").read_text()),
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
        "warm_decoding": json.loads((work / "decode.json").read_text()),
        "profile": read_profile(work / "profile.json"),
    }


def main() -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path, help="the folder gpu.sh wrote its steps' files into")
    parser.add_argument("--out-dir", type=Path, default=Path("results/bench"))
    parser.add_argument("--command", default="bash benchmarks/gpu.sh")
    parser.add_argument(
        "--train-args",
        default="",
        metavar="OVERRIDES",
        help="the KEY=VALUE overrides gpu.sh's TRAIN_ARGS gave the training run, if any",
    )
    parser.add_argument(
        "--config",
        default="configs/transformer.multi30k.en-de.gpu.toml",
        help="the configuration file the run was trained with",
    )
    parser.add_argument(
        "--test-target",
        type=float,
        default=40.0,
        metavar="BLEU",
        help="the valid BLEU whose first checkpoint decoded the test set again (default: 40)",
    )
    parser.add_argument(
        "--first-step-at",
        type=float,
        metavar="BLEU",
        help="only print the step of the run's first validation at or above BLEU (nothing: none)",
    )
    args = parser.parse_args()
    if not args.work.is_dir():
        raise UserError(f"{args.work}: not a folder written by benchmarks/gpu.sh")
    if args.first_step_at is not None:
        first = first_at(read_scalars(args.work / "run").get("valid/bleu", []), args.first_step_at)
        if first is not None:
            print(first[1])
        return
    try:
        record = report(
            args.work, args.command, args.config, args.test_target, args.train_args.split()
        )
    except (OSError, KeyError, ValueError) as err:  # ValueError: bad JSON or TOML too
        raise UserError(f"{args.work}: incomplete benchmark folder ({err!r})") from None
    out = args.out_dir / bench_path("gpu-", record["environment"]["device_name"]).name
    write_record(record, out)
    run = record["training_run"]
    print(f"wrote {out}")
    print(f"time to valid BLEU: {json.dumps(run['time_to_valid_bleu'])}")
    print(f"time to the test score: {run['seconds_to_test_score']} s")
    print(f"time to a test BLEU: {json.dumps(run['time_to_test_bleu'])}")
    syncs = record["host_syncs"]["most_between_log_lines"]
    print(f"host synchronisations of a training step between log lines: at most {syncs}")
    if run["model_flops"] and run["model_flops"]["utilisation"] is not None:
        print(f"model FLOPs utilisation: {run['model_flops']['utilisation']:.2%}")
    print(
        f"training: {run['tgt_tokens_per_second']} target tokens/s, "
        f"peak device memory {run['peak_device_memory_mib']} MiB"
    )
    for name, figures in record["decoding"].items():
        print(
            f"decoding {name}: {figures['sentences_per_second']:.1f} sentences/s, "
            f"BLEU {figures['bleu']:.2f}"
        )
    warm = record["warm_decoding"]
    for beam in (1, 5):
        figures = warm[f"beam{beam}"]
        print(
            f"warm decoding beam{beam}: {figures['sentences_per_second']:.1f} sentences/s, "
            f"{figures['mean_syncs_per_step']:.2f} host synchronisations per step"
        )
    if record["profile"] is None:
        print("profile: none (no profile.json)")
    else:
        for part in ("training", "decoding"):
            print(summary_line(part, record["profile"][part]))


if __name__ == "__main__":
    run_cli(main)
