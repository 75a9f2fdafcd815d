"""Train a translation model: `seq2seq train --config FILE [section.key=value ...]`.

Starting the same command again resumes the run from its last.pt exactly.
Several GPUs or nodes: `torchrun --nproc_per_node=N -m seq2seq train --config FILE`.
"""

from seq2seq.commands.cli import add_plain_option, command_parser
from seq2seq.config import load_config

TUNE = True  # tune the process first (seq2seq.fast.process.tune_process)


def main(argv: list[str]) -> None:
    parser = command_parser("train", __doc__)
    parser.add_argument("--config", help="TOML configuration file (see configs/)")
    parser.add_argument(
        "overrides", nargs="*", metavar="section.key=value", help="e.g. train.lr=1e-3"
    )
    parser.add_argument(
        "--prepare",
        action="store_true",
        help="prepare the corpus named in [data] when data.prepared is missing",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check every file of data.prepared against its manifest's checksums first",
    )
    add_plain_option(parser)
    args = parser.parse_args(argv)
    cfg = load_config(args.config, args.overrides)
    cfg.model.fast &= not args.plain
    from seq2seq.training.loop import train  # imports torch: not for --help

    train(cfg, prepare_missing=args.prepare, verify_data=args.verify)
