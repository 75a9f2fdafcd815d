"""Average the weights of several checkpoints of one run into one checkpoint.

    seq2seq average --out avg.pt run/step-9000.pt run/step-10000.pt
    seq2seq average --out avg.pt --last 5 checkpoints/run

`--last N RUN_DIR` takes the N most recent step-<N>.pt files that training keeps with
train.keep_last. The mean of the last few checkpoints is often a little better than any one of
them. The result translates and evaluates like any checkpoint (it holds no training state).
"""

from pathlib import Path

from seq2seq.commands.cli import check_output, command_parser, number
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
        raise UserError(
            f"--last {count}: {run_dir} has {len(found)} step-<N>.pt checkpoints "
            "(train with train.keep_last to keep them)"
        )
    return found[-count:]


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
    averaged = average_checkpoints(paths)
    try:
        save_checkpoint(averaged, args.out)
    except OSError as err:
        raise UserError(f"--out {args.out}: cannot write ({err.strerror or err})") from None
    print(f"averaged {len(paths)} checkpoints into {args.out}: {', '.join(map(str, paths))}")
