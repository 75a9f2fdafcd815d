"""Train a translation model: `seq2seq train --config FILE [section.key=value ...]`.

Starting the same command again resumes the run from its last.pt exactly.
Several GPUs or nodes: `torchrun --nproc_per_node=N -m seq2seq train --config FILE`.
"""

from pathlib import Path

from seq2seq.commands.cli import add_plain_option, command_parser
from seq2seq.config import load_config

TUNE = True  # tune the process first (seq2seq.fast.process.tune_process)
# The configurations committed with the repository (absent where the package is installed alone).
CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def committed_configs(configs_dir: Path = CONFIGS) -> list[str]:
    """The committed configurations, named as `--config` takes them from the repository root."""
    return sorted(f"configs/{path.name}" for path in configs_dir.glob("*.toml"))


def main(argv: list[str]) -> None:
    parser = command_parser("train", __doc__)
    parser.add_argument(
        "--config", help="TOML configuration file (required; see configs/)", metavar="FILE"
    )
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
    if args.config is None:
        committed = ", ".join(committed_configs())
        parser.error(f"--config FILE is required: {committed or 'see configs/'} or your own")
    cfg = load_config(args.config, args.overrides)
    cfg.model.fast &= not args.plain
    from seq2seq.training.loop import train  # imports torch: not for --help

    train(cfg, prepare_missing=args.prepare, verify_data=args.verify)
