#!/usr/bin/env python3
"""The speed record: Multi30k en-de from process start to the test-set score on one GPU.

    make speedrun                                    # or: python benchmarks/speedrun.py
    python benchmarks/speedrun.py --seeds 3 --set train.max_steps=1200   # a variant
    python benchmarks/speedrun.py --dry-run          # every step, tiny, on a CPU (seconds)

On a GPU machine with PyTorch but no internet (docs/benchmarks.md, "The speed record"), from
the repository root:

    carry   data/multi30k.en-de (the prepared corpus, a folder, not a link: `make data` here, or
            `cp -rL`), and .whl/ with the wheels the machine lacks (here: `make speedrun-wheels`)
    run     python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl &&
            PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 python3 benchmarks/speedrun.py --out-dir OUT
    takes   6 to 9 minutes on one H100 (a limit of 10): an untimed epoch that compiles the 7
            batch shapes an epoch meets (about 50 s a shape, docs/benchmarks.md "On a GPU"),
            then 3 timed runs of about 70 s each; `--set train.compile=false` skips the
            compiling epoch and trains uncompiled (about 4 minutes in all)
    commit  the record it writes, OUT/speedrun-<device>-<time>.json, into results/bench/, then
            `.venv/bin/python benchmarks/results_table.py --update docs/benchmarks.md`

Each seed is a process of its own, timed from just before it starts to the moment its test
score is known: Python's start, the imports, CUDA's start, the corpus to the device, training
(configs/transformer.multi30k.en-de.speedrun.toml, validated with beam 5), the model chosen on
valid (best.pt) and the test set decoded with beam 5 and scored with sacreBLEU. Before them,
when the configuration compiles, one untimed process trains one epoch, which meets every batch
shape, so that torch's inductor cache holds each shape's kernels: the timed runs trace their
graphs again but generate no kernel (the record names the cache and that epoch's seconds).

The record, results/bench/speedrun-<device>-<time>.json, holds the device, torch and CUDA, the
commit, the command, the configuration and its overrides, and for each seed the seconds to the
test score, the test BLEU (and chrF, signature), the valid BLEU of each validation with its
seconds since the start, the median training target tokens/s and the graphs compiled; then
their mean, standard deviation, lowest and highest. benchmarks/results_table.py makes the
record table of docs/benchmarks.md from these records.

--dry-run: the same steps on a CPU, tiny: a small model uncompiled in fp32, a few steps, 10 test
sentences, outputs of a few pieces, its record written outside results/bench (never a record).
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from seq2seq.commands.cli import ArgumentParser, run_cli  # imports no torch
from seq2seq.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
CONFIG = Path("configs/transformer.multi30k.en-de.speedrun.toml")
TARGET_BLEU = 40.0  # the record's target: mean test BLEU of the seeds (sacreBLEU, beam 5)
TEST_BEAM = 5
# --dry-run: a CPU steps through this in seconds; uncompiled (inductor takes minutes on a CPU)
DRY_RUN = [
    'train.device="cpu"',
    'train.precision="fp32"',
    'decode.precision="fp32"',
    "train.compile=false",
    'model.name="transformer-tiny"',
    *("model.embed_dim=32", "model.ffn_size=64", "model.num_heads=2"),
    *("model.encoder_layers=1", "model.decoder_layers=1"),
    *("train.max_tokens=512", "train.max_steps=4", "train.warmup_steps=2"),
    *("train.log_every=2", "train.valid_every=2", "train.valid_max_sentences=4"),
    # an untrained model writes to the longest output allowed: a short one
    *("decode.max_len_ratio=0.5", "decode.max_len_const=2"),
]
DRY_RUN_TEST_SENTENCES = 4


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=3, help="timed runs, seeds 1..N (default 3)")
    parser.add_argument("--dry-run", action="store_true", help="every step, tiny, on a CPU")
    parser.add_argument("--config", type=Path, default=CONFIG, help=f"default {CONFIG}")
    parser.add_argument("--data", type=Path, default=Path("data/multi30k.en-de"))
    parser.add_argument(
        "--set",
        dest="overrides",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="configuration overrides, e.g. train.max_steps=1200 (named in the record)",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        help="where the record goes (default results/bench; with --dry-run the temporary folder)",
    )
    parser.add_argument(
        "--work", type=Path, help="the runs' folders and the compile cache (default: temporary)"
    )
    # the timed process of one seed, and the untimed epoch that fills the compile cache
    parser.add_argument("--one-seed", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--warm-up", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--started", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds {args.seeds}: must be at least 1")
    return args


# ---------------------------------------------------------------------------------------------
# One process: a timed seed, or the untimed epoch that compiles every shape
# ---------------------------------------------------------------------------------------------


def run_overrides(args: argparse.Namespace, run_dir: Path) -> list[str]:
    """The configuration overrides of a run in `run_dir`: the data, the dry run's, --set's."""
    dry = DRY_RUN if args.dry_run else []
    return [f'data.prepared="{args.data}"', f'train.run_dir="{run_dir}"', *dry, *args.overrides]


def one_seed(args: argparse.Namespace) -> None:
    """Train seed `args.one_seed`, decode the test set with the best checkpoint on valid, and
    write what it measured to `args.result`; the clock started at `args.started`."""
    from seq2seq.config_file import load_config
    from seq2seq.training.loop import train

    run_dir = args.work / f"seed-{args.one_seed}"
    seed = [f"train.seed={args.one_seed}"]
    cfg = load_config(args.config, [*run_overrides(args, run_dir), *seed])
    progress = train(cfg)
    sentences = DRY_RUN_TEST_SENTENCES if args.dry_run else 0
    test = test_score(cfg, run_dir / "best.pt", sentences)
    seconds = time.time() - args.started
    result = {
        "seed": args.one_seed,
        "seconds_to_test_score": round(seconds, 2),
        "test": test,
        "steps": progress.step,
        "best_step": progress.best_step,
        "best_valid_bleu": round(progress.best_bleu, 2),
        **compiled_graphs(),
    }
    args.result.write_text(json.dumps(result), encoding="utf-8")


def warm_up(args: argparse.Namespace) -> None:
    """One epoch of training, which meets every batch shape, so that the compile cache holds
    the kernels of each; nothing is validated but at its end (on 4 sentences)."""
    from seq2seq.config_file import load_config
    from seq2seq.training.loop import train

    epoch = ["train.max_epochs=1", "train.valid_every=1000000", "train.valid_max_sentences=4"]
    overrides = [*run_overrides(args, args.work / "warm-up"), *epoch]
    train(load_config(args.config, overrides))


def test_score(cfg: Any, checkpoint: Path, sentences: int) -> dict[str, Any]:
    """sacreBLEU of the test set (its first `sentences` lines; 0: all) decoded by `checkpoint`
    with beam 5, as validation decodes (seq2seq.training.validation), in the training
    precision."""
    import torch

    from seq2seq.data.prepared_corpus import PreparedData
    from seq2seq.decoding.evaluation import evaluate
    from seq2seq.decoding.open_pytorch import load_model
    from seq2seq.device import autocast_dtype, pick_device
    from seq2seq.training.validation import validation_translator

    device = pick_device(cfg.train.device, "train.device")
    dtype = autocast_dtype(cfg.train.precision, device)
    data = PreparedData.load(cfg.data.prepared)
    sources, references = (side[: sentences or None] for side in data.lines("test"))
    model = load_model(checkpoint, device).model
    translator = validation_translator(cfg, model, data, device)
    with (
        torch.no_grad(),
        torch.autocast(device.type, dtype=dtype or torch.float32, enabled=bool(dtype)),
    ):
        result = evaluate(translator, sources, references, TEST_BEAM)
    return {
        "bleu": round(result.bleu, 2),
        "chrf": round(result.chrf, 2),
        "signatures": result.signatures,
        "sentences": result.sentences,
        "beam_size": result.beam_size,
        "checkpoint": "best.pt (the best valid BLEU)",
        "decoding_seconds": round(result.seconds, 2),
    }


def compiled_graphs() -> dict[str, Any]:
    """The graphs Dynamo compiled in this process, and the device's name."""
    import torch
    from torch._dynamo.utils import counters

    cuda = torch.cuda.is_available()
    return {
        "graphs_compiled": counters["stats"]["unique_graphs"],
        "device_name": torch.cuda.get_device_name() if cuda else None,
    }


# ---------------------------------------------------------------------------------------------
# The benchmark: the warm-up, the seeds, the record
# ---------------------------------------------------------------------------------------------


def child(args: argparse.Namespace, *extra: str) -> list[str]:
    """The command line of a process of this script with `args`'s settings and `extra`."""
    command = [sys.executable, str(Path(__file__).resolve()), "--config", str(args.config)]
    command += ["--data", str(args.data), "--work", str(args.work)]
    command += ["--dry-run"] * args.dry_run
    command += ["--set", *args.overrides] if args.overrides else []
    return [*command, *extra]


def start(command: list[str], env: dict[str, str]) -> None:
    """Run `command`; a failure stops the benchmark with its status."""
    status = subprocess.run(command, env=env, cwd=ROOT).returncode
    if status:
        raise SystemExit(status)


def run_seeds(args: argparse.Namespace, env: dict[str, str]) -> list[dict[str, Any]]:
    """Each seed's process, timed from just before it starts, and what it measured."""
    runs = []
    for seed in range(1, args.seeds + 1):
        print(f"== seed {seed} of {args.seeds}", flush=True)
        result = args.work / f"seed-{seed}.json"
        started = time.time()
        extra = ["--one-seed", str(seed), "--started", repr(started), "--result", str(result)]
        start(child(args, *extra), env)
        measured = json.loads(result.read_text(encoding="utf-8"))
        runs.append({**measured, **training_figures(args.work / f"seed-{seed}", started)})
        print(
            f"seed {seed}: test BLEU {measured['test']['bleu']:.2f} "
            f"{measured['seconds_to_test_score']:.1f} s after the start",
            flush=True,
        )
    return runs


def training_figures(run_dir: Path, started: float) -> dict[str, Any]:
    """The run's median training target tokens/s and each validation's (step, seconds since
    `started`, valid BLEU), from its TensorBoard events."""
    from gpu_report import median_scalar, read_scalars

    scalars = read_scalars(run_dir)
    validations = scalars.get("valid/bleu", [])
    return {
        "tgt_tokens_per_second": median_scalar(scalars, "train/tgt_tokens_per_second"),
        "validations": [[s, round(t - started, 1), round(b, 2)] for t, s, b in validations],
    }


def spread(values: list[float]) -> dict[str, float | None]:
    """The mean, sample standard deviation (None for one value), lowest and highest."""
    return {
        "mean": round(statistics.mean(values), 2),
        "stdev": round(statistics.stdev(values), 2) if len(values) > 1 else None,
        "min": min(values),
        "max": max(values),
    }


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The seeds' figures: seconds to the test score, test BLEU, target tokens/s."""
    speeds = [run["tgt_tokens_per_second"] for run in runs if run["tgt_tokens_per_second"]]
    return {
        "seeds": len(runs),
        "seconds_to_test_score": spread([run["seconds_to_test_score"] for run in runs]),
        "test_bleu": spread([run["test"]["bleu"] for run in runs]),
        "tgt_tokens_per_second": spread(speeds) if speeds else None,
        "target_bleu": TARGET_BLEU,
        "reached": statistics.mean(run["test"]["bleu"] for run in runs) >= TARGET_BLEU,
    }


def record(args: argparse.Namespace, runs: list[dict[str, Any]], warm: dict | None) -> dict:
    import torch
    from measure import environment

    device = torch.device("cuda" if runs[0]["device_name"] else "cpu")
    env = environment(device)
    command = ["python", "benchmarks/speedrun.py", *sys.argv[1:]]
    env["command"] = shlex.join(command)
    return {
        "kind": "speedrun",
        "dry_run": args.dry_run,
        "environment": env,
        "config": str(args.config),
        "overrides": args.overrides,
        "configuration": args.config.read_text(encoding="utf-8"),
        "warm_up": warm,
        "summary": summary(runs),
        "runs": runs,
    }


def benchmark(args: argparse.Namespace) -> Path:
    """The warm-up (when the configuration compiles), each seed, and the record; returns the
    record's path."""
    if not (args.data / "manifest.json").is_file():
        raise UserError(f"--data {args.data}: not a prepared corpus; prepare it (make data)")
    from measure import bench_path, write_record  # imports torch

    from seq2seq.config_file import load_config

    compiles = load_config(args.config, run_overrides(args, args.work / "check")).train.compile
    # the inductor cache of the warm-up, read by every timed run
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(args.work / "inductor-cache")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    warm = None
    if compiles or args.dry_run:  # the dry run takes every step
        print("== warm-up: one untimed epoch compiles every batch shape", flush=True)
        began = time.time()
        start(child(args, "--warm-up"), env)
        warm = {"seconds": round(time.time() - began, 1), "cache": env["TORCHINDUCTOR_CACHE_DIR"]}
    runs = run_seeds(args, env)
    result = record(args, runs, warm)
    name = bench_path("speedrun-", runs[0]["device_name"] or "cpu").name
    out = (args.out_dir or Path("results/bench")) / name
    write_record(result, out)
    return out


def report(path: Path) -> None:
    """Print the record's summary."""
    figures = json.loads(path.read_text(encoding="utf-8"))["summary"]
    seconds, bleu = figures["seconds_to_test_score"], figures["test_bleu"]
    print(f"wrote {path}")
    print(
        f"{figures['seeds']} seeds: test BLEU {bleu['mean']:.2f} (stdev {bleu['stdev']}), "
        f"{seconds['mean']:.1f} s to the test score (stdev {seconds['stdev']}); "
        f"target {figures['target_bleu']:g}: {'reached' if figures['reached'] else 'not reached'}"
    )


def main() -> None:
    args = parse_args()
    if args.one_seed is not None:
        one_seed(args)
        return
    if args.warm_up:
        warm_up(args)
        return
    with tempfile.TemporaryDirectory(prefix="speedrun-") as temporary:
        args.work = (args.work or Path(temporary)).resolve()
        args.data = args.data.resolve()
        if args.dry_run and args.out_dir is None:
            args.out_dir = Path(tempfile.gettempdir())
        path = benchmark(args)
        report(path)


if __name__ == "__main__":
    run_cli(main)
