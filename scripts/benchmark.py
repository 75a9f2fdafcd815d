"""Benchmark training throughput, peak memory and decoding speed, or the cost growth with length.

    scripts/benchmark.py                               # gru, transformer-tiny, transformer-small
    scripts/benchmark.py --quick                       # minutes on a CPU: a check, not a result
    scripts/benchmark.py --checkpoint-dir checkpoints  # decode with trained weights where found
    scripts/benchmark.py --checkpoint transformer-tiny=checkpoints/run/best.pt
    scripts/benchmark.py --growth                      # cost against sequence length, with a plot
    scripts/benchmark.py --models transformer-tiny model.num_heads=8   # a variant of a preset

Writes results/bench/<device>-<time>.json (--growth: growth-<device>-<time>.json and .png) and
prints its table. What is measured, and how: see seq2seq/benchmark.py.
"""

import argparse
from pathlib import Path

from seq2seq import benchmark
from seq2seq.benchmark import GROWTH_MODELS, QUICK, THROUGHPUT_MODELS, Settings
from seq2seq.cli import run_cli
from seq2seq.config import DECODE_PRECISIONS, MODEL_PRESETS, PRECISIONS
from seq2seq.results import growth_section, throughput_section


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be >= 1")
    return value


def parse_args() -> tuple[argparse.Namespace, Settings]:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    defaults = Settings()
    parser.add_argument(
        "overrides", nargs="*", metavar="model.key=value", help="changes to every preset"
    )
    parser.add_argument(
        "--models",
        nargs="+",
        choices=list(MODEL_PRESETS),
        help=f"presets (default: {' '.join(THROUGHPUT_MODELS)}; --growth: "
        f"{' '.join(GROWTH_MODELS)})",
    )
    parser.add_argument("--device", help="auto (default: CUDA when present), cpu, cuda, cuda:1")
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="training precision as train.precision (default: auto, as in training)",
    )
    parser.add_argument(
        "--decode-precision",
        choices=DECODE_PRECISIONS,
        help="decoding precision as decode.precision (default: auto, as in decoding)",
    )
    parser.add_argument("--seed", type=int)
    parser.add_argument("--quick", action="store_true", help=f"smaller settings: {QUICK}")
    parser.add_argument("--out", type=Path, help="the JSON file (default: results/bench/...)")
    throughput = parser.add_argument_group("throughput (the default)")
    throughput.add_argument("--data", help=f"prepared corpus (default: {defaults.data})")
    throughput.add_argument(
        "--max-tokens", type=positive, help=f"tokens per batch (default: {defaults.max_tokens})"
    )
    throughput.add_argument(
        "--warmup-steps", type=int, help=f"untimed steps (default: {defaults.warmup_steps})"
    )
    throughput.add_argument("--steps", type=positive, help=f"timed (default: {defaults.steps})")
    throughput.add_argument(
        "--decode-sentences",
        type=positive,
        help="decode the first N test sentences (default: all)",
    )
    throughput.add_argument(
        "--beams", nargs="+", type=positive, help=f"beam sizes (default: {defaults.beams})"
    )
    throughput.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        metavar="MODEL=PATH",
        help="decode MODEL with these trained weights (repeat for several models)",
    )
    throughput.add_argument(
        "--checkpoint-dir",
        metavar="DIR",
        help="use DIR/<run>/best.pt of the runs that trained a model on --data",
    )
    growth = parser.add_argument_group("cost growth")
    growth.add_argument("--growth", action="store_true", help="measure cost against length")
    growth.add_argument(
        "--lengths", nargs="+", type=positive, help=f"(default: {defaults.lengths})"
    )
    growth.add_argument(
        "--batch-size", type=positive, help=f"sentences (default: {defaults.batch_size})"
    )
    growth.add_argument(
        "--repeats", type=positive, help=f"timed runs per figure (default: {defaults.repeats})"
    )
    args = parser.parse_args()

    if any(not item.startswith("model.") for item in args.overrides):
        parser.error("overrides change the model only: model.key=value")
    if args.lengths and min(args.lengths) < 2:
        parser.error("--lengths: each length must be >= 2 (a token and EOS)")
    if args.growth and (args.checkpoint or args.checkpoint_dir):
        parser.error("--growth measures random weights: no --checkpoint or --checkpoint-dir")
    models = args.models or (GROWTH_MODELS if args.growth else THROUGHPUT_MODELS)
    checkpoints = {}
    for item in args.checkpoint:
        name, sep, path = item.partition("=")
        if not sep or name not in models:
            parser.error(f"--checkpoint {item}: expected MODEL=PATH with MODEL one of {models}")
        checkpoints[name] = path

    given = {key: value for key, value in vars(args).items() if value is not None}
    values = {key: given[key] for key in vars(defaults) if key in given}
    settings = Settings(**{**(QUICK if args.quick else {}), **values, "models": list(models)})
    if args.checkpoint_dir:
        found = benchmark.find_checkpoints(args.checkpoint_dir, models, settings.data)
        checkpoints = {**found, **checkpoints}
    settings.checkpoints = checkpoints
    return args, settings


def main() -> None:
    args, settings = parse_args()
    run, section = (
        (benchmark.run_growth, growth_section)
        if args.growth
        else (benchmark.run_throughput, throughput_section)
    )
    record = run(settings)
    out = args.out or benchmark.default_out(record)
    written = benchmark.save(record, out)
    print()
    print(section(record, out))
    print(f"\nwrote {', '.join(map(str, written))}")


if __name__ == "__main__":
    run_cli(main, tune=True)
