"""Translate with a trained model: an interactive prompt on a terminal, or line by line.

    seq2seq translate --model transformer-tiny.multi30k.en-de          # the shipped model
    seq2seq translate --checkpoint checkpoints/run/best.pt              # prompt
    seq2seq translate --checkpoint best.pt --show-attention --nbest 3   # with n-best, heatmap
    seq2seq translate --checkpoint best.pt < input.en > output.de       # batch mode
    seq2seq translate --model transformer-tiny.multi30k.en-de --engine ctranslate2  # faster

docs/translate.md describes the prompt (its keys and history), how a line is cut into sentences
translated one by one (--no-split-sentences: the line whole), and batch mode (input piped in,
or --input FILE: one output line per input line, N lines in Moses format with --nbest N, and
--save-attention's FILE-0.png, FILE-1.png, ... numbered as those lines are).
"""

from __future__ import annotations

import argparse
import atexit
import sys
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext, suppress
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO

from seq2seq.commands.cli import (
    add_decode_options,
    add_model_options,
    add_split_option,
    check_output,
    command_parser,
    ranged,
    take_terminal,
    terminal_width,
)
from seq2seq.config_rules import ARGUMENTS, line_problem
from seq2seq.decoding.model_result import domain_and_limits, shipped_model_names
from seq2seq.errors import UserError
from seq2seq.files import text_lines

if TYPE_CHECKING:  # the functions import what decodes (torch), so that --help answers at once
    from seq2seq.decoding.line_translator import LineTranslator, Translation
    from seq2seq.decoding.open_pytorch import Inference

HISTORY_FILE = Path.home() / ".seq2seq_history"
HISTORY_LENGTH = 1000
CHUNK_LINES = 4096  # batch mode reads, translates and writes this many lines at a time


TUNE = False  # tuned for torch once a PyTorch model loads (seq2seq.commands.engine)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = command_parser("translate", __doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter  # one shipped model a line
    parser.epilog = "\n  ".join(["shipped models (--model NAME):", *shipped_model_names()])
    add_model_options(parser)
    add_decode_options(parser, batch_size_help="sentences per batch in batch mode")
    add_split_option(parser)
    parser.add_argument(
        "--nbest",
        default=1,
        metavar="N",
        **ranged(int, ARGUMENTS["nbest"], "show the N best translations, N <= the beam", "1"),
    )
    parser.add_argument(
        "--show-attention",
        action="store_true",
        help="print the attention heatmap (to stderr in batch mode)",
    )
    parser.add_argument(
        "--save-attention",
        metavar="FILE.png",
        help="save the attention map as an image; several sentences: FILE-0.png, FILE-1.png, ... "
        "(counted from 0, as the n-best lines are)",
    )
    parser.add_argument("--input", metavar="FILE", help="translate FILE instead of standard input")
    parser.add_argument(
        "--format",
        choices=("text", "html"),
        default="text",
        help="html: each line is HTML, its tags kept around the words they enclose (the best "
        "translation alone, PyTorch engine only; docs/translate.md)",
    )
    args = parser.parse_args(argv)
    if args.format == "html" and (args.nbest != 1 or args.show_attention or args.save_attention):
        raise UserError(
            "--format html: the best translation alone, without attention maps; leave out "
            "--nbest, --show-attention and --save-attention"
        )
    if args.save_attention:
        check_output("--save-attention", args.save_attention, [args.input])
    return args


def load_translator(args: argparse.Namespace) -> tuple[LineTranslator, list[str], str | None]:
    """The translator of the checkpoint (on the engine --engine picks), with the options
    applied, the lines the prompt starts with (`scope_lines`), and the note to print if a
    translation comes out empty (`untrained_note`)."""
    from seq2seq.commands.engine import load_translator as load_engine_translator
    from seq2seq.commands.engine import model_folder
    from seq2seq.decoding.model_folder import CARD

    # --format html aligns with PyTorch's attention: "auto" picks PyTorch for it
    need_attention = args.show_attention or bool(args.save_attention) or args.format == "html"
    translator, config, inference = load_engine_translator(args, need_attention)
    if args.format == "html":
        from seq2seq.decoding.markup import pytorch_translator

        pytorch_translator(translator, "--format")  # refused before any line is read
    beam = config.decode.beam_size
    if not 1 <= args.nbest <= beam:
        raise UserError(f"--nbest {args.nbest}: must be between 1 and the beam size ({beam})")
    translator.check_beam_size(beam)
    note = untrained_note(args, inference) if inference is not None else None
    card = inference.card if inference is not None else model_folder(args.model) / CARD
    domain, limits = domain_and_limits(card, config.data.corpus)
    return translator, scope_lines(args.model or args.checkpoint, domain, limits), note


def scope_lines(model: str, domain: str, limits: list[dict[str, str]]) -> list[str]:
    """What the prompt says first: the text the model knows, and what it gets wrong, with the
    examples of its card (`seq2seq.decoding.model_result.domain_and_limits`)."""
    lines = [f"{model} is trained on {domain}; other kinds of text may come out wrong."]
    if limits:
        lines.append("What it gets wrong, for example:")
        for limit in limits:
            lines.append(f"  {limit['problem']}: {limit['source']} -> {limit['output']}")
    return lines


def untrained_note(args: argparse.Namespace, inference: Inference) -> str | None:
    """What to say on stderr when a line's translation comes out empty from a model saved before
    its run's first validation was due (e.g. a last.pt saved at step 0); None for a model trained
    longer."""
    valid_every = inference.config.train.valid_every
    if inference.step >= valid_every:
        return None
    return (
        f"note: {args.model or args.checkpoint} was saved at step {inference.step} (its run "
        f"validates every {valid_every} steps): the model is not trained yet, and its "
        "translations can be empty"
    )


def warn_if_truncated(name: str, translation: Translation, limit: int) -> None:
    """Say on stderr that input line `name` (e.g. "standard input:3") was cut short."""
    if translation.truncated_from is not None:
        print(
            f"warning: {name}: {translation.truncated_from:,} pieces, cut to the first {limit}",
            file=sys.stderr,
        )


def attention_path(save_attention: str, number: int | None) -> Path:
    """FILE.png itself, or FILE-<number>.png when several sentences are saved."""
    path = Path(save_attention)
    return path if number is None else path.with_name(f"{path.stem}-{number}{path.suffix}")


def save_attention_map(best: Translation, path: Path) -> None:
    from seq2seq.decoding.attention_maps import attention_figure

    figure = attention_figure(best.attention, best.src_pieces, best.tgt_pieces, best.text)
    try:
        figure.savefig(path)
    except OSError as err:
        raise UserError(f"--save-attention {path}: cannot write: {err}") from None


def show(nbest: list[Translation], show_attention: bool) -> None:
    """Print one input's translation (or n-best list) and its attention heatmap at the prompt."""
    if len(nbest) == 1:
        print(nbest[0].text)
        print(f"  (score {nbest[0].score:.3f})")
    else:
        for rank, translation in enumerate(nbest, start=1):
            print(f"{rank:>2}. [{translation.score:8.3f}] {translation.text}")
    if show_attention and nbest[0].attention is not None:
        print_attention(nbest[0], sys.stdout)


def print_attention(best: Translation, stream: TextIO) -> None:
    """The attention heatmap of `best` as text, as wide as the terminal `stream` writes to."""
    from seq2seq.decoding.attention_maps import attention_text  # imports torch

    width = terminal_width(stream)
    print(attention_text(best.attention, best.src_pieces, best.tgt_pieces, width), file=stream)


def translate_lines(
    translator: LineTranslator, lines: list[str], args: argparse.Namespace
) -> list[list[Translation]]:
    """The n-best list of each line, as the options ask: --nbest, attention maps, and with
    --format html each line's best translation with its tags (seq2seq.decoding.markup)."""
    if args.format == "html":
        from seq2seq.decoding.markup import translate_html

        found = translate_html(
            translator, lines, split_sentences=args.split_sentences, option="--format"
        )
        return [[best] for best in found]
    return translator.translate(
        lines,
        nbest=args.nbest,
        need_attention=args.show_attention or bool(args.save_attention),
        split_sentences=args.split_sentences,
    )


def start_history() -> None:
    """Line editing and a persistent history, where the platform has GNU readline."""
    try:
        import readline
    except ImportError:
        return
    with suppress(OSError):  # no history yet, or an unreadable one: start afresh
        readline.read_history_file(HISTORY_FILE)
    readline.set_history_length(HISTORY_LENGTH)

    def save_history() -> None:
        with suppress(OSError):  # a read-only home folder costs the history, nothing else
            readline.write_history_file(HISTORY_FILE)

    atexit.register(save_history)


def interactive(
    translator: LineTranslator, args: argparse.Namespace, scope: list[str], untrained: str | None
) -> None:
    from seq2seq.decoding.line_translator import SourceTooLong

    take_terminal()
    start_history()
    print("\n".join(scope))
    print("Type a sentence and press Enter. Ctrl-C cancels the line, Ctrl-D quits.")
    limit = translator.source_limit(translator.decode_cfg.beam_size)
    saved = 0
    while True:
        try:
            line = input("> ")
            if not line.strip():
                continue
            problem = line_problem(line)  # bytes not UTF-8 reach input() as lone surrogates
            if problem:
                print(f"error: this line: {problem}", file=sys.stderr)
                continue
            nbest = translate_lines(translator, [line], args)[0]
        except SourceTooLong as err:
            print(f"error: {err.problem}", file=sys.stderr)
            continue
        except KeyboardInterrupt:
            print()
            continue
        except EOFError:
            print()
            return
        warn_if_truncated("this line", nbest[0], limit)
        show(nbest, args.show_attention)
        if untrained and not nbest[0].text:
            print(untrained, file=sys.stderr)
            untrained = None  # once
        if args.save_attention and nbest[0].attention is not None:
            path = attention_path(args.save_attention, saved)
            save_attention_map(nbest[0], path)
            print(f"  attention map saved to {path}")
            saved += 1


def read_chunks(lines: Iterable[str]) -> Iterator[list[str]]:
    """`lines`, CHUNK_LINES at a time."""
    lines = iter(lines)
    while chunk := list(islice(lines, CHUNK_LINES)):
        yield chunk


def batch_mode(
    translator: LineTranslator,
    args: argparse.Namespace,
    lines: Iterable[str],
    name: str,
    untrained: str | None,
) -> None:
    """One output line per input line (N with --nbest N), translated a chunk at a time; `name`
    (e.g. "standard input") names the input in errors and warnings. `untrained` goes to stderr,
    once, when a line that is not empty gets an empty translation.

    The attention map of input line k (from 0, as in the n-best lines) is FILE-k.png; an empty
    line has none.
    """
    from seq2seq.decoding.line_translator import SourceTooLong

    limit = translator.source_limit(translator.decode_cfg.beam_size)
    line_number = 0
    for chunk in read_chunks(lines):
        # Every chunk but the last is full, so a first chunk of one line is the whole input.
        numbered = line_number > 0 or len(chunk) > 1
        try:
            translated = translate_lines(translator, chunk, args)
        except SourceTooLong as err:
            raise UserError(f"{name}:{line_number + err.index + 1}: {err.problem}") from None
        for line, nbest in zip(chunk, translated, strict=True):
            warn_if_truncated(f"{name}:{line_number + 1}", nbest[0], limit)
            if untrained and line.strip() and not nbest[0].text:
                print(untrained, file=sys.stderr)
                untrained = None  # once
            if args.nbest == 1:
                print(nbest[0].text)
            else:
                for translation in nbest:
                    print(f"{line_number} ||| {translation.text} ||| {translation.score:.4f}")
            best = nbest[0]
            if best.attention is not None:
                if args.show_attention:
                    print_attention(best, sys.stderr)
                if args.save_attention:
                    path = attention_path(args.save_attention, line_number if numbered else None)
                    save_attention_map(best, path)
            line_number += 1
        sys.stdout.flush()


def open_input(args: argparse.Namespace) -> AbstractContextManager[BinaryIO]:
    """--input FILE, or standard input, as bytes (seq2seq.files.text_lines decodes them)."""
    if args.input is None:
        return nullcontext(sys.stdin.buffer)
    try:
        return open(args.input, "rb")
    except OSError as err:
        raise UserError(f"--input {args.input}: cannot read: {err}") from None


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    with open_input(args) as stream:
        translator, scope, untrained = load_translator(args)
        if args.input is None and sys.stdin.isatty():
            interactive(translator, args, scope, untrained)
            return
        name = "standard input" if args.input is None else f"--input {args.input}"
        batch_mode(translator, args, text_lines(stream, name), name, untrained)
