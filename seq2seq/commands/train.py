"""Train a translation model: `seq2seq train --config FILE [section.key=value ...]`.

Starting the same command again resumes the run from its last.pt exactly.
Several GPUs or nodes: `torchrun --nproc_per_node=N -m seq2seq train --config FILE`.
"""

import argparse
import io
import os
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, redirect_stderr
from pathlib import Path

from seq2seq.commands.cli import add_plain_option, command_parser
from seq2seq.config import MODEL_PRESETS, model_preset, model_shape
from seq2seq.config_file import load_config
from seq2seq.errors import UserError

TUNE = True  # tune the process first (seq2seq.fast.process.tune_process)
QUIET_RANK_PAUSE_S = 2.0  # see said_by_rank_0
# The configurations committed with the repository (absent where the package is installed alone).
CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def committed_configs(configs_dir: Path = CONFIGS) -> list[str]:
    """The committed configurations, named as `--config` takes them from the repository root."""
    return sorted(f"configs/{path.name}" for path in configs_dir.glob("*.toml"))


def presets_help(configs_dir: Path = CONFIGS) -> str:
    """The end of `seq2seq train --help`: each model preset's shape, and each committed
    configuration that changes its preset's shape (e.g. the Tatoeba ones: transformer-small as
    4+2 layers), so that a preset's name is never taken for a shape it does not have."""
    lines = ["model presets (model.name; a configuration's [model] keys change them):"]
    lines += [f"  {name:<18} {model_shape(model_preset(name))}" for name in MODEL_PRESETS]
    changed = []
    for config in committed_configs(configs_dir):
        model = load_config(configs_dir / Path(config).name).model
        if (shape := model_shape(model)) != model_shape(model_preset(model.name)):
            changed += [f"  {config}:", f"    {model.name} as {shape}"]
    if changed:
        lines += ["committed configurations that change their preset's shape:", *changed]
    return "\n".join(lines)


@contextmanager
def said_by_rank_0(silence_stderr: bool = False) -> Iterator[None]:
    """Under torchrun, a run that must stop (a UserError, a bad command line) stops every
    process with status 2, and rank 0 alone prints why. The other ranks stop quietly, and a
    moment later: torchrun stops every process once one has ended, and rank 0 must have
    printed by then. silence_stderr: also hide what those ranks print in the block (argparse's
    error line)."""
    if int(os.environ.get("RANK", 0)) == 0:  # torchrun's numbering; a plain run is rank 0
        yield
        return
    try:
        with redirect_stderr(io.StringIO()) if silence_stderr else nullcontext():
            yield
    except (UserError, SystemExit) as stop:
        if isinstance(stop, SystemExit) and not stop.code:  # --help
            raise
        time.sleep(QUIET_RANK_PAUSE_S)
        sys.exit(2)


def main(argv: list[str]) -> None:
    parser = command_parser("train", __doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter  # the epilog's lines as they are
    parser.description = textwrap.fill(parser.description, 80)
    parser.epilog = presets_help()
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
    with said_by_rank_0(silence_stderr=True):
        args = parser.parse_args(argv)
        if args.config is None:
            committed = ", ".join(committed_configs())
            parser.error(f"--config FILE is required: {committed or 'see configs/'} or your own")
    with said_by_rank_0():
        cfg = load_config(args.config, args.overrides)
        cfg.model.fast &= not args.plain
        from seq2seq.training.loop import train  # imports torch: not for --help

        train(cfg, prepare_missing=args.prepare, verify_data=args.verify)
