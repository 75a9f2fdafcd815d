"""User-facing errors: one line on stderr and a non-zero exit, never a traceback.

`run_cli` runs a script's main; `ArgumentParser`, `number` and `check_output` refuse a bad
command line, option value or output file before any work is done.
"""

import argparse
import os
import sys
from collections.abc import Callable, Container, Iterable
from pathlib import Path
from typing import NoReturn, TypeVar

Number = TypeVar("Number", int, float)


class UserError(Exception):
    """A problem with the user's input (a file, an option, a configuration value).

    The message names what is wrong and where; `run_cli` prints it as one line.
    """


def run_cli(main: Callable[[], None]) -> None:
    """Run a script's `main`, turning `UserError` and Ctrl-C into a one-line error and exit code."""
    try:
        main()
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (`... | head`): stop quietly, as command-line tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, reporting a bad command line as one `error:` line (exit status 2)
    instead of the usage text followed by the error; `--help` still shows the usage."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def number(kind: Callable[[str], Number], valid: Container[Number]) -> Callable[[str], Number]:
    """An argparse `type`: the option's text as `kind` (int or float), refused unless it is in
    `valid` (e.g. a `seq2seq.config.Range`, whose text says which values are)."""

    def convert(text: str) -> Number:
        try:
            value = kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if value not in valid:
            raise argparse.ArgumentTypeError(f"{text}: {valid}")
        return value

    return convert


def check_output(
    option: str,
    path: str | Path,
    inputs: Iterable[str | Path | None],
    create_folder: bool = False,
) -> None:
    """Refuse, before any work is done, an output file that would overwrite one of the `inputs`
    or that cannot be written: a folder, a file in a read-only folder, or in a missing folder
    (unless `create_folder`: then the nearest existing folder above it must be writable)."""
    target = Path(path)
    for given in filter(None, inputs):
        source = Path(given)
        same = source.resolve() == target.resolve()
        if same or (source.exists() and target.exists() and source.samefile(target)):
            raise UserError(f"{option} {path}: is also an input ({given}); choose another file")
    if target.is_dir():
        raise UserError(f"{option} {path}: is a folder; give a file name")
    folder = target.resolve().parent
    while create_folder and not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.exists():
        raise UserError(f"{option} {path}: the folder {folder} does not exist")
    if not folder.is_dir():
        raise UserError(f"{option} {path}: {folder} is not a folder")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise UserError(f"{option} {path}: not writable")
