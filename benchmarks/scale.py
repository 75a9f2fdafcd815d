#!/usr/bin/env python3
"""How preparing, training start-up and evaluation scale with the corpus size.

Corpora of about 160k, 800k and 4M pairs are Tatoeba en-fr's training split repeated 1, 5 and 25
times (repetitions, for size only: nothing is learnt from them), with its valid and test splits
once. For each size this records:

    prepare     seq2seq prepare --corpus files: wall time and peak RSS (a first
                prepare: the folder is removed before)
    train       seq2seq train, the Transformer config on that folder, 10 updates: start-up
                (process start to the end of the first update) and RSS at step 10
    evaluate    seq2seq evaluate on that run's checkpoint, 100 test sentences, greedy:
                wall time and peak RSS

and the same training figures on Multi30k en-de (the reference for RSS: the corpus the
config was made for). Writes results/bench/scale/scale-<time>.json and a PNG of each figure
against corpus size.

    python benchmarks/scale.py --mirror ../shared/data [--sizes 1 25]

Peak RSS is the largest resident set of the process or its children (wait4's ru_maxrss).
"""

import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import seq2seq.commands
from seq2seq.commands.cli import ArgumentParser, run_cli
from seq2seq.decoding.model_result import git_state

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "transformer.multi30k.en-de.toml"
STEPS = 10
EVAL_SENTENCES = 100
SEQ2SEQ = [sys.executable, "-m", "seq2seq"]


def run_measured(args: list[str], env: dict[str, str] | None = None) -> dict[str, float]:
    """Run `seq2seq ARGS...` to completion: its wall time and peak RSS (MB); fails loudly."""
    started = time.perf_counter()
    process = subprocess.Popen([*SEQ2SEQ, *args], cwd=ROOT, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"error: seq2seq {' '.join(args)} failed ({status})")
    return {"seconds": round(seconds, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}


def tatoeba_splits(work: Path, mirror: str) -> Path:
    """Tatoeba en-fr prepared once (its cleaned, normalised splits are the corpora's source)."""
    folder = work / "tatoeba.en-fr"
    run_measured(
        [
            "prepare",
            "--corpus",
            "tatoeba",
            "--src",
            "en",
            "--tgt",
            "fr",
            "--mirror",
            mirror,
            "--out",
            str(folder),
        ]
    )
    return folder


def write_corpus(source: Path, repetitions: int, out: Path) -> int:
    """`train.*` = the training split `repetitions` times; valid and test once. Returns pairs."""
    out.mkdir(parents=True, exist_ok=True)
    for lang in ("en", "fr"):
        train = (source / f"train.{lang}").read_bytes()
        with open(out / f"train.{lang}", "wb") as f:
            for _ in range(repetitions):
                f.write(train)
        for split in ("valid", "test"):
            (out / f"{split}.{lang}").write_bytes((source / f"{split}.{lang}").read_bytes())
    return (source / "train.en").read_bytes().count(b"\n") * repetitions


def train_overrides(prepared: Path, run_dir: Path) -> list[str]:
    manifest = json.loads((prepared / "manifest.json").read_text())
    return [
        f'data.prepared="{prepared}"',
        f'data.src="{manifest["src"]}"',
        f'data.tgt="{manifest["tgt"]}"',
        f'train.run_dir="{run_dir}"',
        f"train.max_steps={STEPS}",
        f"train.save_every={STEPS}",
        "train.valid_every=100000",
        "train.log_every=1",
        "train.device=cpu",
    ]


def measure_training(prepared: Path, run_dir: Path) -> dict[str, float]:
    """Start-up (process start to the first update's end) and RSS at step 10 of a training run."""
    report = run_dir.with_suffix(".json")
    args = [__file__, "--train-child", str(report), "--config", str(CONFIG)]
    started = time.time()
    measured = run_measured([*args, *train_overrides(prepared, run_dir)])
    steps = json.loads(report.read_text())
    return {
        "startup_seconds": round(steps["first_update"] - started, 2),
        "rss_step10_mb": steps["rss_mb"],
        "rss_anon_step10_mb": steps["rss_anon_mb"],
        "wall_seconds": measured["seconds"],
    }


def _rss_mb() -> tuple[float, float]:
    """This process's resident set and its anonymous part (file pages shared through the page
    cache, such as memory-mapped token arrays, are the rest), in MB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return tuple(int(fields[key].split()[0]) / 1024 for key in ("VmRSS", "RssAnon"))


def train_child(report: Path, train_args: list[str]) -> None:
    """Run seq2seq train in this process, noting when the first update ends and the RSS at
    step 10 (a hook on every optimizer's step)."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    record: dict[str, float] = {}

    def after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        record["steps"] = record.get("steps", 0) + 1
        if record["steps"] == 1:
            record["first_update"] = time.time()
        if record["steps"] == STEPS:
            record["rss_mb"], record["rss_anon_mb"] = (round(v, 1) for v in _rss_mb())
            report.write_text(json.dumps(record))

    register_optimizer_step_post_hook(after_step)
    seq2seq.commands.main(["train", *train_args])


def measure_evaluation(prepared: Path, run_dir: Path, work: Path) -> dict[str, float]:
    src, ref = work / "eval.en", work / "eval.fr"
    for path, lang in ((src, "en"), (ref, "fr")):
        lines = (prepared / f"test.{lang}").read_text(encoding="utf-8").splitlines()
        path.write_text("\n".join(lines[:EVAL_SENTENCES]) + "\n", encoding="utf-8")
    args = ["evaluate", "--checkpoint", str(run_dir / "last.pt"), "--src", str(src)]
    return run_measured([*args, "--ref", str(ref), "--beam", "1", "--device", "cpu"])


def plot(results: list[dict[str, Any]], reference: dict[str, float], path: Path) -> None:
    """Each figure against corpus size; the training figures with Multi30k's as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = [
        ("prepare", "seconds", "prepare time (s)"),
        ("prepare", "peak_rss_mb", "prepare peak RSS (MB)"),
        ("train", "startup_seconds", "training start-up (s)"),
        ("train", "rss_step10_mb", "training RSS at step 10 (MB)"),
        ("evaluate", "seconds", "evaluate.py time (s)"),
        ("evaluate", "peak_rss_mb", "evaluate.py peak RSS (MB)"),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    pairs = [row["pairs"] for row in results]
    for ax, (stage, key, title) in zip(axes.flat, figures, strict=True):
        values = [row[stage][key] for row in results]
        ax.plot(pairs, values, marker="o")
        if stage == "train":
            values.append(reference[key])
            ax.axhline(reference[key], linestyle="--", color="gray", label="Multi30k (29k pairs)")
            ax.legend(loc="lower right")
        ax.set_xscale("log")
        ax.set_xticks(pairs, [f"{count / 1e6:.2f}M" for count in pairs])
        ax.minorticks_off()
        ax.set_xlabel("training pairs (Tatoeba repeated)")
        ax.set_title(title)
        ax.set_ylim(0, max(values) * 1.15)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", required=True, help="folder holding tatoeba-eng-fra/")
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[1, 5, 25],
        help="repetitions of Tatoeba's training split (default: 1 5 25)",
    )
    parser.add_argument("--work", default="data/bench-scale", help="corpora and runs go here")
    parser.add_argument(
        "--out",
        default="results/bench/scale",
        help="folder for the JSON and PNG (not results/bench itself: its tables in the README "
        "know the kinds of benchmarks/bench.py)",
    )
    args = parser.parse_args()

    work = Path(args.work).resolve()
    mirror = str(Path(args.mirror).resolve())
    source = tatoeba_splits(work, mirror)
    multi30k = work / "multi30k.en-de"
    run_measured(["prepare", "--mirror", mirror, "--out", str(multi30k)])
    shutil.rmtree(work / "run-multi30k", ignore_errors=True)
    reference = measure_training(multi30k, work / "run-multi30k")
    print(json.dumps({"multi30k": reference}), flush=True)
    results = []
    for repetitions in args.sizes:
        name = f"x{repetitions}"
        pairs = write_corpus(source, repetitions, work / f"raw-{name}")
        prepared, run_dir = work / f"prepared-{name}", work / f"run-{name}"
        prepare_args = [
            "prepare",
            "--corpus",
            "files",
            "--src",
            "en",
            "--tgt",
            "fr",
            "--data-dir",
            str(work / f"raw-{name}"),
            "--out",
            str(prepared),
        ]
        for folder in (prepared, run_dir):  # measure a first prepare and a new run
            shutil.rmtree(folder, ignore_errors=True)
        row = {"repetitions": repetitions, "pairs": pairs}
        row["prepare"] = run_measured(prepare_args)
        row["train"] = measure_training(prepared, run_dir)
        row["evaluate"] = measure_evaluation(prepared, run_dir, work)
        print(json.dumps(row), flush=True)
        results.append(row)

    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out)
    import torch  # here, not at the top: the training child measures its own start-up
    from measure import device_name, write_record

    revision, dirty = git_state()
    record = {
        "kind": "scale",
        "command": shlex.join(["python", *sys.argv]),
        "git_revision": revision,
        "git_dirty": dirty,
        "corpora": "Tatoeba en-fr training split repeated `repetitions` times (repetitions, "
        "for size only), its valid and test splits once",
        "config": str(CONFIG.relative_to(ROOT)),
        "machine": {
            "cpu": device_name(torch.device("cpu")),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "multi30k_train": reference,
        "results": results,
    }
    write_record(record, out / f"scale-{stamp}.json")
    plot(results, reference, out / f"scale-{stamp}.png")
    print(f"wrote {out / f'scale-{stamp}.json'} and .png")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--train-child":
        train_child(Path(sys.argv[2]), sys.argv[3:])
    else:
        run_cli(main)
