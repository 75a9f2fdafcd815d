"""Average the weights of several checkpoints of one run into one checkpoint.

    seq2seq average --out avg.pt run/step-9000.pt run/step-10000.pt
    seq2seq average --out avg.pt --last 5 checkpoints/run

`--last N RUN_DIR` takes the N most recent step-<N>.pt files that training keeps with
train.keep_last. The mean of the last few checkpoints is often a little better than any one of
them. The result translates and evaluates like any checkpoint (it holds no training state).
"""

from pathlib import Path

from seq2seq.commands.cli import check_output, command_parser, number
from seq2seq.config_file import load_config
from seq2seq.config_rules import AT_LEAST_1
from seq2seq.errors import UserError

TUNE = False  # tune the process first (seq2seq.fast.process.tune_process)


def last_step_checkpoints(run_dir: Path, count: int) -> list[Path]:
    """The `count` step-<N>.pt files of `run_dir` with the highest N, oldest first."""
    from seq2seq.training.checkpoint import step_checkpoints

    if not run_dir.is_dir():
        raise UserError(f"--last: {run_dir} is not a folder")
    found = step_checkpoints(run_dir)
    if len(found) < count:
        use_fewer = f"; average those with --last {len(found)}" if found else ""
        raise UserError(
            f"--last {count}: {run_dir} has {len(found)} step-<N>.pt checkpoints: "
            f"{why_fewer(run_dir, count, len(found))}{use_fewer}"
        )
    return found[-count:]


def why_fewer(run_dir: Path, count: int, found: int) -> str:
    """Why the run folder `run_dir` holds `found` step checkpoints, fewer than `count`, as its
    config.toml tells: training writes one at each validation and keeps train.keep_last."""
    try:
        train = load_config(run_dir / "config.toml").train
    except UserError:  # not a run folder written by seq2seq train
        return "training keeps the checkpoints of the last train.keep_last validations"
    kept = f"train.keep_last={train.keep_last} in its config.toml"
    if train.keep_last == 0:
        return f"the run keeps none ({kept}); train with train.keep_last={count} to keep them"
    if train.keep_last < count:
        return f"the run keeps the checkpoints of its last {train.keep_last} validations ({kept})"
    return (
        f"the run keeps those of its last {train.keep_last} validations ({kept}), one every "
        f"{train.valid_every} steps, and has written {found} so far"
    )


def main(argv: list[str]) -> None:
    parser = command_parser("average", __doc__)
    parser.add_argument("--out", required=True, help="the averaged checkpoint to write")
    parser.add_argument(
        "--last", type=number(int, AT_LEAST_1), metavar="N", help="average the last N of RUN_DIR"
    )
    parser.add_argument(
        "inputs", nargs="+", metavar="CHECKPOINT|RUN_DIR", help="checkpoints, or one run folder"
    )
    args = parser.parse_args(argv)
    from seq2seq.training.checkpoint import average_checkpoints, save_checkpoint

    if args.last is not None:
        if len(args.inputs) != 1:
            parser.error("--last N takes one run folder")
        paths = last_step_checkpoints(Path(args.inputs[0]), args.last)
    else:
        paths = [Path(p) for p in args.inputs]
    check_output("--out", args.out, paths, create_folder=True)
    save_checkpoint(average_checkpoints(paths), args.out)  # a failed write: a UserError
    print(f"averaged {len(paths)} checkpoints into {args.out}: {', '.join(map(str, paths))}")
