"""Align words: which source word each target word translates, read off cross-attention.

    seq2seq align --model transformer-small.tatoeba.en-fr < pairs.txt          # i-j links
    seq2seq align --model transformer-small.tatoeba.en-fr \\
        --reverse-model transformer-small.tatoeba.fr-en --input pairs.txt     # both directions
    seq2seq align --model transformer-small.tatoeba.en-fr --input pairs.txt --gold gold.txt
    seq2seq align --model transformer-small.tatoeba.en-fr --input pairs.txt --gold gold.txt --grid

Each input line is `SOURCE ||| TARGET` (words split on whitespace) and gives one output line of
links in Pharaoh form, `i-j` for source word i and target word j, counted from 0; a line with
no ` ||| ` is a source alone: the model translates it and its output line is
`TRANSLATION ||| LINKS`. --rule picks the attention that aligns (docs/align.md): `mean` (of every
layer and head), `layer:L`, `head:L.H`, `alignment-head` (the head trained to align), each
optionally after `shifted:`. --reverse-model gives
the opposite model (fr-en for en-fr), and --combine how the two directions are combined.

With --gold FILE (one line per input line: `i-j` sure links and `ipj` possible ones, counted
from 1), the command prints the alignment error rate (AER), precision and recall instead of the
links; with --grid, those of every layer and head. --lines A-B takes input lines A to B alone
(from 1), and --swap reads each line (and its gold) as `TARGET ||| SOURCE` of the model.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from seq2seq.commands.cli import add_model_options, command_parser, ranged
from seq2seq.config_rules import ARGUMENTS
from seq2seq.errors import UserError
from seq2seq.files import iter_lines, text_lines

if TYPE_CHECKING:  # torch is imported when the work starts, so that --help answers at once
    from seq2seq.decoding.alignment import (
        Aligner,
        AlignmentScore,
        GoldFile,
        GoldLinks,
        WordAlignment,
    )

TUNE = True  # tune the process first (seq2seq.fast.process.tune_process)
SEPARATOR = " ||| "
COMBINE_CHOICES = ("intersection", "union", "grow-diag", "grow-diag-final", "grow-diag-final-and")


@dataclass
class Pair:
    """One input line: its number (from 1), source, and target (None: translate it)."""

    number: int
    src: str
    tgt: str | None


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = command_parser("align", __doc__)
    add_model_options(parser)
    parser.add_argument(
        "--rule",
        default="mean",
        help="the attention that aligns: mean (of every layer and head; the default), layer:L, "
        "head:L.H, alignment-head (the head trained to align), each optionally after shifted: "
        "(docs/align.md)",
    )
    parser.add_argument(
        "--reverse-model",
        metavar="NAME|FOLDER",
        help="the opposite model (target to source): align both ways and combine",
    )
    parser.add_argument("--reverse-rule", help="the reverse model's rule (default: --rule)")
    parser.add_argument(
        "--combine",
        choices=COMBINE_CHOICES,
        default="grow-diag-final",
        help="how --reverse-model's links join the model's (default: grow-diag-final)",
    )
    parser.add_argument("--input", metavar="FILE", help="read FILE instead of standard input")
    parser.add_argument("--gold", metavar="FILE", help="score against this gold: AER, P, R")
    parser.add_argument("--grid", action="store_true", help="with --gold: every layer and head")
    parser.add_argument("--lines", metavar="A-B", help="input lines A to B alone (from 1)")
    parser.add_argument(
        "--swap", action="store_true", help="lines and gold are TARGET ||| SOURCE of the model"
    )
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")
    parser.add_argument(
        "--beam", **ranged(int, ARGUMENTS["beam"], "beam size of translations", "the model's")
    )
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda, ...")
    args = parser.parse_args(argv)
    if args.grid and (args.gold is None or args.reverse_model is not None):
        parser.error("--grid needs --gold, and scores one model (no --reverse-model)")
    return args


def line_range(text: str | None, count: int) -> range:
    """The indexes (from 0) of the lines `--lines A-B` names among `count` lines."""
    if text is None:
        return range(count)
    first, _, last = text.partition("-")
    if not (first.isdecimal() and last.isdecimal() and 1 <= int(first) <= int(last) <= count):
        raise UserError(f"--lines {text}: A-B with 1 <= A <= B <= {count} (the input's lines)")
    return range(int(first) - 1, int(last))


def read_pairs(lines: list[str], name: str, swap: bool) -> list[Pair]:
    """Each line as a `Pair` (sides swapped with `swap`); a UserError naming the line for one
    with more than one separator, or a target without a source."""
    pairs = []
    for number, line in enumerate(lines, start=1):
        sides = [side.strip() for side in line.split(SEPARATOR.strip())]
        if len(sides) > 2 or (swap and len(sides) == 1):
            raise UserError(f"{name}:{number}: one `SOURCE ||| TARGET` pair a line")
        src, tgt = (sides[::-1] if swap else sides) if len(sides) == 2 else (sides[0], None)
        pairs.append(Pair(number, src, tgt))
    return pairs


def read_input(args: argparse.Namespace) -> list[str]:
    if args.input is None:
        return list(text_lines(sys.stdin.buffer, "standard input"))
    return list(iter_lines(Path(args.input), f"--input {args.input}"))


def load_aligner(name: str, args: argparse.Namespace, rule: str, option: str) -> Aligner:
    """The Aligner of model `name` (--checkpoint or --model for the forward one) with `rule`."""
    from seq2seq.decoding.alignment import Aligner, AlignmentRule
    from seq2seq.decoding.open_pytorch import load_model
    from seq2seq.decoding.torch_translator import Translator
    from seq2seq.device import pick_device

    parsed = AlignmentRule.parse(rule, option)
    device = pick_device(args.device)
    inference = load_model(name, device, args.plain)
    if args.beam is not None:
        inference.config.decode.beam_size = args.beam
    return Aligner(Translator.from_inference(inference, device), parsed, option)


def align_all(
    pairs: list[Pair],
    forward: Aligner,
    reverse: Aligner | None,
    args: argparse.Namespace,
    name: str,
) -> list[WordAlignment]:
    """The alignment of every pair, a source alone aligned to its translation by the model."""
    from seq2seq.decoding.alignment import align_ids

    sources = [pair.src for pair in pairs if pair.tgt is None]
    translated = iter(
        forward.translator.translate(sources, split_sentences=False) if sources else []
    )
    alignments = []
    for pair in pairs:
        try:
            if pair.tgt is None:
                best = next(translated)[0]
                ids = best.src_tokens, best.tokens
            else:
                ids = forward.ids(pair.src, pair.tgt)
            alignments.append(align_ids(forward, ids, reverse, args.combine))
        except ValueError as err:
            raise UserError(f"{name}:{pair.number}: {err}") from None
    return alignments


def read_gold_lines(name: str, count: int, swap: bool = False) -> list[GoldLinks]:
    """The gold of the file `name` (--gold), one line per input line (turned round with
    `swap`)."""
    from seq2seq.decoding.alignment import read_gold

    path = Path(name)
    gold = read_gold(path, iter_lines(path, f"--gold {name}"))
    if len(gold) != count:
        raise UserError(f"--gold {name}: {len(gold)} lines, the input has {count}")
    return [links.reversed() for links in gold] if swap else gold


def check_targets(pairs: list[Pair], name: str) -> None:
    """A UserError naming the first pair with no target: gold needs both sides."""
    first = next((pair for pair in pairs if pair.tgt is None), None)
    if first is not None:
        raise UserError(f"{name}:{first.number}: --gold needs `SOURCE ||| TARGET` lines")


def read_gold_file(pairs_name: str, gold_name: str) -> GoldFile:
    """The pairs of the file `pairs_name` and their gold, the file `gold_name`, checked as
    `--input PAIRS --gold GOLD` are (`seq2seq explore --gold PAIRS GOLD`)."""
    from seq2seq.decoding.alignment import GoldFile

    name = f"--gold {pairs_name}"
    pairs = read_pairs(list(iter_lines(Path(pairs_name), name)), name, swap=False)
    check_targets(pairs, name)
    sides = [(pair.src, pair.tgt or "") for pair in pairs]
    return GoldFile(gold_name, sides, read_gold_lines(gold_name, len(pairs)))


def score(
    alignments: list[WordAlignment],
    gold: list[GoldLinks],
    pairs: list[Pair],
    args: argparse.Namespace,
) -> AlignmentScore:
    """The AER counts of `alignments` against `gold`; a gold link past its pair's words is a
    UserError naming the gold file and line."""
    from seq2seq.decoding.alignment import AlignmentScore

    total = AlignmentScore()
    for alignment, links, pair in zip(alignments, gold, pairs, strict=True):
        try:
            total.add_pair(alignment, links)
        except ValueError as err:
            raise UserError(f"--gold {args.gold}:{pair.number}: {err}") from None
    return total


def grid(
    pairs: list[Pair], gold: list[GoldLinks], forward: Aligner, args: argparse.Namespace
) -> dict[str, AlignmentScore]:
    """The AER counts of every rule of the grid (`alignment.rules_of`), by the rule's name."""
    from seq2seq.decoding.alignment import add_to_grid

    scores: dict[str, AlignmentScore] = {}
    for pair, links in zip(pairs, gold, strict=True):
        if pair.tgt is None:
            raise UserError(f"--gold {args.gold}:{pair.number}: the input line has no target")
        maps = forward.maps(*forward.ids(pair.src, pair.tgt))
        try:
            add_to_grid(scores, maps, links, forward.rule.shifted)
        except ValueError as err:
            raise UserError(f"--gold {args.gold}:{pair.number}: {err}") from None
    return scores


def print_scores(scores: dict[str, AlignmentScore], as_json: bool) -> None:
    """One line per rule: AER, precision and recall in percent; or one JSON object."""
    summaries = {rule: found.summary() for rule, found in scores.items()}
    if as_json:
        print(json.dumps(summaries, indent=1))
        return
    print(f"{'rule':<22} {'AER':>5} {'P':>5} {'R':>5} {'links':>7} {'sure':>7}")
    for rule, s in summaries.items():
        line = f"{rule:<22} {s['aer']:5.1f} {s['precision']:5.1f} {s['recall']:5.1f}"
        print(f"{line} {s['links']:7d} {s['sure']:7d}")


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    name = "standard input" if args.input is None else f"--input {args.input}"
    lines = read_input(args)
    chosen = line_range(args.lines, len(lines))
    pairs = read_pairs(lines, name, args.swap)[chosen.start : chosen.stop]
    gold = None
    if args.gold:
        gold = read_gold_lines(args.gold, len(lines), args.swap)[chosen.start : chosen.stop]
        check_targets(pairs, name)
    forward = load_aligner(args.checkpoint or args.model, args, args.rule, "--rule")
    if args.grid:
        print_scores(grid(pairs, gold, forward, args), args.json)
        return
    reverse = None
    if args.reverse_model is not None:
        option = "--reverse-rule" if args.reverse_rule else "--rule"
        rule = args.reverse_rule or args.rule
        reverse = load_aligner(args.reverse_model, args, rule, option)
    alignments = align_all(pairs, forward, reverse, args, name)
    if gold is not None:
        rule = str(forward.rule) if reverse is None else f"{forward.rule} {args.combine}"
        print_scores({rule: score(alignments, gold, pairs, args)}, args.json)
        return
    for pair, alignment in zip(pairs, alignments, strict=True):
        if args.swap:
            alignment = alignment.reversed()
        links = alignment.pharaoh()
        print(links if pair.tgt is not None else f"{' '.join(alignment.tgt_words)} ||| {links}")
