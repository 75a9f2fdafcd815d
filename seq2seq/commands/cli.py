"""What the subcommands share: the runner (`run_cli`), the parsers, which refuse a bad command
line, option value or output file with one `error:` line before any work is done, the model and
decoding options, and the terminal of the interactive prompt.

Building a parser imports no torch, so that `--help` answers at once: the modules that compute
are imported by the functions that use them.
"""

from __future__ import annotations

import argparse
import atexit
import os
import signal
import sys
from collections.abc import Callable, Container, Iterable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, TypeVar

from seq2seq.config import DecodeConfig
from seq2seq.config_rules import ARGUMENTS, DECODE_PRECISIONS, RULES, Range
from seq2seq.errors import UserError
from seq2seq.files import check_output_location

if TYPE_CHECKING:  # torch is imported by the commands that decode, when they start working
    import torch

    from seq2seq.decoding.open_pytorch import Inference

Number = TypeVar("Number", int, float)


def run_cli(main: Callable[[], None], tune: bool = False) -> None:
    """Run a script's `main`, turning `UserError` and Ctrl-C into a one-line error and exit code.

    tune: first call `seq2seq.fast.process.tune_process` (the scripts that train or decode)."""
    if tune:
        from seq2seq.fast.process import tune_process  # imports torch (seq2seq.fast)

        tune_process()
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


def summary(doc: str) -> str:
    """The first paragraph of a command's docstring, on one line: what the command does."""
    return " ".join(doc.strip().split("\n\n")[0].split())


def command_parser(name: str, doc: str) -> ArgumentParser:
    """The parser of `seq2seq NAME`, described by the first paragraph of its docstring and
    named as it was run: `seq2seq NAME`, or the script of scripts/ that runs it."""
    script = Path(sys.argv[0])
    run_as_script = script.parent.name == "scripts" and script.suffix == ".py"
    prog = f"scripts/{script.name}" if run_as_script else f"seq2seq {name}"
    return ArgumentParser(prog=prog, description=summary(doc))


def number(kind: Callable[[str], Number], valid: Container[Number]) -> Callable[[str], Number]:
    """An argparse `type`: the option's text as `kind` (int or float), refused unless it is in
    `valid` (e.g. a `seq2seq.config_rules.Range`, whose text says which values are)."""

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


def ranged(kind: Callable[[str], Number], rule: Range, what: str, default: str) -> dict[str, Any]:
    """The `type` and `help` of an option that takes a `kind` in `rule`: `what` it is, the range
    (written once, in seq2seq.config_rules) and the `default`."""
    return {"type": number(kind, rule), "help": f"{what} ({rule.interval()}; default: {default})"}


def check_output(
    option: str,
    path: str | Path,
    inputs: Iterable[str | Path | None],
    create_folder: bool = False,
) -> None:
    """Refuse, before any work is done, an output file that would overwrite one of the `inputs`
    or that cannot be written: a folder, a path through a loop of symbolic links, a file in a
    folder that takes no files (read-only, /proc), or in a missing folder (unless
    `create_folder`: then the nearest existing folder above it must take files)."""
    target = Path(path)
    resolved = check_output_location(option, target)
    for given in filter(None, inputs):
        source = Path(given)
        try:
            same = source.resolve() == resolved
        except (OSError, RuntimeError):  # an input through a symbolic link loop fails when read
            continue
        if same or (source.exists() and target.exists() and source.samefile(target)):
            raise UserError(f"{option} {path}: is also an input ({given}); choose another file")
    if target.is_dir():
        raise UserError(f"{option} {path}: is a folder; give a file name")
    folder = resolved.parent
    if not create_folder and not folder.exists():
        raise UserError(f"{option} {path}: the folder {folder} does not exist")
    if target.exists() and not os.access(target, os.W_OK):
        raise UserError(f"{option} {path}: not writable")


# --- Model and decoding options (seq2seq translate, evaluate, export, serve) ---------------


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """Add --checkpoint and --model (exactly one of them is needed) and --plain to `parser`."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="a checkpoint written by training")
    source.add_argument(
        "--model",
        metavar="NAME|FOLDER",
        help="an exported model: the name of a shipped one "
        "(e.g. transformer-tiny.multi30k.en-de) or a folder from seq2seq export",
    )
    add_plain_option(parser)


def add_plain_option(parser: argparse.ArgumentParser) -> None:
    """Add --plain (model.fast=false) to `parser`."""
    parser.add_argument(
        "--plain",
        action="store_true",
        help="run the textbook modules alone (model.fast=false): the same results, without the "
        "fast twins of seq2seq/fast",
    )


def load_model(args: argparse.Namespace, device: str | torch.device) -> Inference:
    """The model that --checkpoint or --model names, on `device`, plain with --plain
    (`open_pytorch.load_model`)."""
    from seq2seq.decoding import open_pytorch

    if args.checkpoint is not None:
        return open_pytorch.load_model(args.checkpoint, device, args.plain, kind="checkpoint")
    return open_pytorch.load_model(args.model, device, args.plain, kind="exported")


def add_decode_options(parser: argparse.ArgumentParser, batch_size_help: str) -> None:
    """Add the search options, the repetition guards, the options of how the search runs and
    the source length limit to `parser`, in that order. Each option but --device and --engine
    overrides one field of the checkpoint's [decode] configuration for this run."""
    add_search_options(parser)
    add_guard_options(parser)
    add_running_options(parser, batch_size_help)
    add_source_limit_options(parser)


def add_search_options(parser: argparse.ArgumentParser) -> None:
    """Add --beam, --length-penalty, --stop-early and --max-len-ratio to `parser`."""
    parser.add_argument(
        "--beam", **ranged(int, ARGUMENTS["beam"], "beam size", "the checkpoint's decode")
    )
    parser.add_argument(
        "--length-penalty",
        metavar="ALPHA",
        **ranged(
            float,
            ARGUMENTS["length_penalty"],
            "GNMT length penalty; higher favours longer outputs",
            "the checkpoint's",
        ),
    )
    parser.add_argument(
        "--stop-early",
        action="store_true",
        help="beam search: end a sentence when its most probable candidate ends (OpenNMT-py's "
        "rule; faster), not when the beam has ended (fairseq's)",
    )
    parser.add_argument(
        "--max-len-ratio",
        metavar="RATIO",
        **ranged(
            float,
            ARGUMENTS["max_len_ratio"],
            "the longest output: RATIO x the source length + decode.max_len_const",
            "the checkpoint's",
        ),
    )


def add_guard_options(parser: argparse.ArgumentParser) -> None:
    """Add the guards against repeating and miswritten numbers (--no-repeat-ngram,
    --max-piece-repeat, --keep-numbers) to `parser`."""
    parser.add_argument(
        "--no-repeat-ngram",
        metavar="N",
        **ranged(
            int,
            RULES["decode.no_repeat_ngram"],
            "ban a token that would repeat an N-gram of the output; 0: off",
            "the checkpoint's",
        ),
    )
    parser.add_argument(
        "--max-piece-repeat",
        metavar="R",
        **ranged(
            int,
            RULES["decode.max_piece_repeat"],
            "ban a piece that would come more than R times in a row; 0: off",
            "the checkpoint's",
        ),
    )
    parser.add_argument(
        "--keep-numbers",
        action=argparse.BooleanOptionalAction,
        help="write a number only as one of the source's, whole, and every character whole "
        "(the number guard; default: the checkpoint's decode.keep_numbers)",
    )


def add_split_option(parser: argparse.ArgumentParser) -> None:
    """Add --no-split-sentences (translate and evaluate) to `parser`."""
    parser.add_argument(
        "--no-split-sentences",
        dest="split_sentences",
        action="store_false",
        help="translate each line whole (by default a line is cut into sentences, each is "
        "translated, and they are joined again with the line's own spacing)",
    )


def add_running_options(parser: argparse.ArgumentParser, batch_size_help: str) -> None:
    """Add --batch-size, --precision, --device and --engine to `parser`."""
    parser.add_argument(
        "--batch-size",
        type=number(int, RULES["decode.batch_size"]),
        help=f"{batch_size_help} ({RULES['decode.batch_size'].interval()})",
    )
    parser.add_argument(
        "--precision",
        help="auto, bf16, fp16 (slow on a CPU), fp32, or int8 (CPU only: int8 linear layers, "
        "the rest fp32) (default: the checkpoint's decode.precision)",
    )
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:1, ...")
    parser.add_argument(
        "--engine",
        choices=["pytorch", "ctranslate2", "auto"],
        default="pytorch",
        help="pytorch (default): the textbook search; ctranslate2: CTranslate2 on the same "
        "weights (Transformers; a folder from seq2seq export --format ctranslate2 or any "
        "model); auto: ctranslate2 where it gives what pytorch would",
    )


def add_source_limit_options(parser: argparse.ArgumentParser) -> None:
    """Add the source length limit (--max-src-pieces, --truncate) to `parser`."""
    parser.add_argument(
        "--max-src-pieces",
        metavar="N",
        **ranged(
            int,
            RULES["decode.max_src_pieces"],
            "refuse an input line of more than N sentencepiece pieces",
            "the checkpoint's decode.max_src_pieces, 256 unless set",
        ),
    )
    parser.add_argument(
        "--truncate",
        action="store_true",
        help="cut a longer input line to the limit, with a warning, instead of refusing it",
    )


def apply_decode_options(args: argparse.Namespace, decode_cfg: DecodeConfig) -> None:
    """Set the options given in `args` in `decode_cfg` (in place), checking --precision."""
    if args.precision is not None and args.precision not in DECODE_PRECISIONS:
        raise UserError(
            f"--precision {args.precision}: must be one of {', '.join(DECODE_PRECISIONS)}"
        )
    # the options named as the keys they set
    keys = ["length_penalty", "max_len_ratio", "no_repeat_ngram", "max_piece_repeat"]
    keys += ["keep_numbers", "batch_size", "precision", "max_src_pieces"]
    given = {key: getattr(args, key) for key in keys} | {"beam_size": args.beam}
    for key, value in given.items():
        if value is not None:
            setattr(decode_cfg, key, value)
    decode_cfg.stop_early |= args.stop_early
    decode_cfg.truncate_src |= args.truncate


# --- The terminal (seq2seq translate's prompt) ---------------------------------------------


def terminal_width(stream: TextIO) -> int | None:
    """The width of the terminal `stream` writes to; None when it is not a terminal."""
    try:
        return os.get_terminal_size(stream.fileno()).columns if stream.isatty() else None
    except (OSError, ValueError):
        return None


def take_terminal() -> None:
    """Make this process the terminal's foreground process group, until it exits.

    A terminal sends Ctrl-C to every process of its foreground group. Started by `make
    translate`, the prompt shares that group with make, which waits for the prompt to end and
    then exits with status 130 however cleanly the prompt quit. In a group of its own, Ctrl-C
    reaches the prompt alone (and Ctrl-Z, which would stop it with make still waiting, is
    ignored). Started from a shell, the prompt already leads its own group: nothing changes."""
    fd = sys.stdin.fileno()
    try:
        previous = os.tcgetpgrp(fd)
        if os.getpgrp() == os.getpid() or previous != os.getpgrp():
            return
        # A process outside the foreground group may set it only while ignoring SIGTTOU.
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        os.setpgid(0, 0)
        os.tcsetpgrp(fd, os.getpgrp())
    except OSError:
        return
    signal.signal(signal.SIGTSTP, signal.SIG_IGN)

    def give_back() -> None:
        with suppress(OSError):
            os.tcsetpgrp(fd, previous)

    atexit.register(give_back)
