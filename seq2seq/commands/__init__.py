"""The `seq2seq` command: one subcommand per stage, one module per subcommand.

    seq2seq COMMAND [options]        # or: python -m seq2seq COMMAND [options]
    seq2seq COMMAND --help

One module per subcommand, in the order of the data flow:

    prepare.py    fetch, clean, train sentencepiece, write a prepared folder
    train.py      train a model from a configuration; run it again to resume
    translate.py  translate: an interactive prompt on a terminal, or line by line
    evaluate.py   score a model with sacreBLEU: BLEU, lowercased BLEU and chrF
    align.py      align words through attention, both directions combined, AER against gold
    average.py    average the weights of several checkpoints of one run
    export.py     export a model folder that translates on its own, or one for CTranslate2
    serve.py      serve models over HTTP: the JSON API, LibreTranslate's API, metrics
    explore.py    explore attention in the browser

and what they share:

    cli.py        the runner, the parsers, the model and decoding options, the terminal
    engine.py     the engine a command decodes with (--engine): PyTorch or CTranslate2

A subcommand's docstring is its help, `TUNE` says whether the process is tuned first
(seq2seq.fast.process), and `main(argv)` parses its options and does the work; a UserError
becomes one `error:` line and exit status 2 (seq2seq.commands.cli.run_cli). Importing a command
module changes nothing in the process and imports no torch (its functions import what
computes), so `--help` answers at once and tunes nothing.
"""

import importlib
import sys
import textwrap
from collections.abc import Sequence
from functools import partial
from types import ModuleType

from seq2seq.commands.cli import run_cli, summary

# The subcommands, in the order of the data flow (and of `seq2seq --help`).
COMMANDS = (
    "prepare",
    "train",
    "translate",
    "evaluate",
    "align",
    "average",
    "export",
    "serve",
    "explore",
)


def command_module(name: str) -> ModuleType:
    return importlib.import_module(f"seq2seq.commands.{name}")


def usage() -> str:
    """`seq2seq --help`: the commands, each with the first paragraph of its docstring."""
    lines = [
        "usage: seq2seq COMMAND [options]",
        "",
        "Neural machine translation with attention, built to be read.",
        "",
        "commands:",
    ]
    for name in COMMANDS:
        text = f"  {name:<10}  {summary(command_module(name).__doc__)}"
        lines += textwrap.wrap(text, 80, subsequent_indent=" " * 14)
    lines += ["", "`seq2seq COMMAND --help` describes the options of one command."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Run `seq2seq COMMAND [options]` (argv: the arguments after the program name)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(usage())
        return
    if not argv or argv[0] not in COMMANDS:
        given = f"unknown command {argv[0]!r}" if argv else "no command given"
        listed = ", ".join(COMMANDS)
        print(f"error: {given}; commands: {listed} (see seq2seq --help)", file=sys.stderr)
        sys.exit(2)
    module = command_module(argv[0])
    wants_help = any(arg in ("-h", "--help") for arg in argv[1:])
    run_cli(partial(module.main, argv[1:]), tune=module.TUNE and not wants_help)
