"""Align words: which source word each target word translates, read off cross-attention.

    seq2seq align --model transformer-small.tatoeba.en-fr < pairs.txt          # i-j links
    seq2seq align --model transformer-small.tatoeba.en-fr \\
        --reverse-model transformer-small.tatoeba.fr-en --input pairs.txt     # both directions
    seq2seq align --model transformer-small.tatoeba.en-fr --input pairs.txt --gold gold.txt
    seq2seq align --model transformer-small.tatoeba.en-fr --input pairs.txt --gold gold.txt --grid
    seq2seq align --model transformer-small.tatoeba.en-fr --input pairs.txt --gold gold.txt \
        --lines 1-100 --lines 101-447 --record results/models/NAME.json

Each input line is `SOURCE ||| TARGET` (words split on whitespace) and gives one output line of
links in Pharaoh form, `i-j` for source word i and target word j, counted from 0; a line with
no ` ||| ` is a source alone: the model translates it and its output line is
`TRANSLATION ||| LINKS`. --rule picks the attention that aligns (docs/align.md): `mean` (of every
layer and head), `layer:L`, `head:L.H`, `alignment-head` (the head trained to align), each
optionally after `shifted:`; with --gold it may be given several times, to score each rule
beside the others. --reverse-model gives
the opposite model (fr-en for en-fr), and --combine how the two directions are combined.

With --gold FILE (one line per input line: `i-j` sure links and `ipj` possible ones, counted
from 1), the command prints the alignment error rate (AER), precision and recall instead of the
links: of the model alone and, with --reverse-model, of both directions combined; with --grid,
those of every layer and head. --lines A-B takes input lines A to B alone (from 1); with --gold,
--lines given several times scores each range apart. --swap reads each line (and its gold) as
`TARGET ||| SOURCE` of the model.

--record FILE adds those scores to the model's existing record FILE (seq2seq evaluate --record,
seq2seq.decoding.model_result) as its field alignment_test, and changes nothing else in it: the
gold file's name and number of pairs, the model's direction, its rule (the first --rule), the
scores by line range and by rule, the command that prints them, and the git revision.
"""

from __future__ import annotations

import argparse
import json
import shlex
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
        PairMaps,
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
        action="append",
        help="the attention that aligns: mean (of every layer and head; the default), layer:L, "
        "head:L.H, alignment-head (the head trained to align), each optionally after shifted: "
        "(docs/align.md); with --gold, repeat it to score several rules",
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
    parser.add_argument(
        "--lines",
        metavar="A-B",
        action="append",
        help="input lines A to B alone (from 1); with --gold, repeat it to score several ranges",
    )
    parser.add_argument(
        "--swap", action="store_true", help="lines and gold are TARGET ||| SOURCE of the model"
    )
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")
    parser.add_argument(
        "--record",
        metavar="FILE",
        help="with --gold and --input: add the scores to the model's record FILE (alignment_test)",
    )
    parser.add_argument(
        "--beam", **ranged(int, ARGUMENTS["beam"], "beam size of translations", "the model's")
    )
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda, ...")
    args = parser.parse_args(argv)
    args.rule = args.rule or ["mean"]
    twice = next((rule for index, rule in enumerate(args.rule) if rule in args.rule[:index]), None)
    if twice is not None:
        parser.error(f"--rule {twice} given twice")
    if len(args.rule) > 1 and (args.gold is None or args.grid):
        parser.error("several --rule need --gold (and no --grid)")
    if args.grid and (args.gold is None or args.reverse_model is not None):
        parser.error("--grid needs --gold, and scores one model (no --reverse-model)")
    if len(args.lines or []) > 1 and (args.gold is None or args.grid):
        parser.error("several --lines need --gold (and no --grid)")
    if args.record and (args.gold is None or args.input is None or args.grid):
        parser.error("--record needs --gold and --input (and no --grid)")
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


def load_aligners(
    name: str, args: argparse.Namespace, rules: list[str], option: str
) -> list[Aligner]:
    """The Aligners of model `name` (--checkpoint or --model for the forward one), one for each
    of `rules`, all parsed before the model is loaded."""
    from seq2seq.decoding.alignment import Aligner, AlignmentRule
    from seq2seq.decoding.open_pytorch import load_model
    from seq2seq.decoding.torch_translator import Translator
    from seq2seq.device import pick_device

    parsed = [AlignmentRule.parse(rule, option) for rule in rules]
    device = pick_device(args.device)
    inference = load_model(name, device, args.plain)
    if args.beam is not None:
        inference.config.decode.beam_size = args.beam
    translator = Translator.from_inference(inference, device)
    return [Aligner(translator, rule, option) for rule in parsed]


def align_all(
    pairs: list[Pair],
    forwards: list[Aligner],
    reverses: list[Aligner],
    args: argparse.Namespace,
    name: str,
) -> dict[str, list[WordAlignment]]:
    """The alignment of every pair by the model alone under each rule of `forwards` (one model,
    an Aligner a rule), by the rule's name, each followed, with `reverses` (the opposite
    model's Aligners, one for each of `forwards`; none: the model alone), by both directions
    combined, under `RULE COMBINE`. Each model teacher-forces a pair once for every rule; a
    source alone is aligned to its translation by the model."""
    from seq2seq.decoding.alignment import check_sides

    forward = forwards[0]
    sources = [pair.src for pair in pairs if pair.tgt is None]
    translated = iter(
        forward.translator.translate(sources, split_sentences=False) if sources else []
    )
    rows: dict[str, list[WordAlignment]] = {}
    for pair in pairs:
        try:
            if pair.tgt is None:
                best = next(translated)[0]
                ids = best.src_tokens, best.tokens
            else:
                ids = forward.ids(pair.src, pair.tgt)
            check_sides(ids)
        except ValueError as err:
            raise UserError(f"{name}:{pair.number}: {err}") from None
        add_rows(rows, forward.maps(*ids), forwards, reverses, args.combine)
    return rows


def add_rows(
    rows: dict[str, list[WordAlignment]],
    maps: PairMaps,
    forwards: list[Aligner],
    reverses: list[Aligner],
    combine: str,
) -> None:
    """Add one pair's alignments to `rows` (`align_all`): its `maps` under each rule of
    `forwards`, each followed by both directions combined by `combine` when there are
    `reverses`, whose model teacher-forces the pair turned round once."""
    from seq2seq.decoding.alignment import combined, turned_maps

    alone = [maps.align(forward.rule) for forward in forwards]
    turned = turned_maps(alone[0], reverses[0]) if reverses else None
    for index, (forward, aligned) in enumerate(zip(forwards, alone, strict=True)):
        rows.setdefault(str(forward.rule), []).append(aligned)
        if turned is not None:
            backward = turned.align(reverses[index].rule).reversed()
            both = combined(aligned, backward, combine)
            rows.setdefault(f"{forward.rule} {combine}", []).append(both)


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


def summaries(scores: dict[str, AlignmentScore]) -> dict[str, dict[str, float | int]]:
    """AER, precision, recall and counts (`AlignmentScore.summary`) by rule."""
    return {rule: found.summary() for rule, found in scores.items()}


def print_scores(by_lines: dict[str, dict[str, dict]], as_json: bool) -> None:
    """The summaries of each line range (`lines A-B`), one line per rule: AER, precision and
    recall in percent, and the counts, in a table headed `rule` for one range and by the range
    for several; or JSON: {rule: summary} of one range, {range: {rule: summary}} of several."""
    if as_json:
        one = len(by_lines) == 1
        print(json.dumps(next(iter(by_lines.values())) if one else by_lines, indent=1))
        return
    width = max(22, *(len(rule) for rows in by_lines.values() for rule in rows))
    for lines, rows in by_lines.items():
        label = "rule" if len(by_lines) == 1 else lines
        print(f"{label:<{width}} {'AER':>5} {'P':>5} {'R':>5} {'links':>7} {'sure':>7}")
        for rule, s in rows.items():
            line = f"{rule:<{width}} {s['aer']:5.1f} {s['precision']:5.1f} {s['recall']:5.1f}"
            print(f"{line} {s['links']:7d} {s['sure']:7d}")


def score_ranges(
    rows: dict[str, list[WordAlignment]],
    gold: list[GoldLinks],
    pairs: list[Pair],
    ranges: list[range],
    args: argparse.Namespace,
) -> dict[str, dict[str, dict]]:
    """The summaries of every row of `rows` (alignments of `pairs`, by rule) against their `gold`
    on each of `ranges` (input lines from 0), by the range's name, `lines A-B` (from 1)."""
    first = min(lines.start for lines in ranges)  # the input line of pairs[0]
    by_lines = {}
    for lines in ranges:
        part = slice(lines.start - first, lines.stop - first)
        found = {
            rule: score(alignments[part], gold[part], pairs[part], args)
            for rule, alignments in rows.items()
        }
        by_lines[f"lines {lines.start + 1}-{lines.stop}"] = summaries(found)
    return by_lines


def alignment_command(args: argparse.Namespace) -> str:
    """The command that prints the scores --record keeps."""
    source = ["--checkpoint", args.checkpoint] if args.checkpoint else ["--model", args.model]
    words = ["seq2seq", "align", *source]
    if args.reverse_model is not None:
        words += ["--reverse-model", args.reverse_model, "--combine", args.combine]
    if args.rule != ["mean"]:
        for rule in args.rule:
            words += ["--rule", rule]
    if args.reverse_model is not None and args.reverse_rule:
        words += ["--reverse-rule", args.reverse_rule]
    words += ["--swap"] if args.swap else []
    words += ["--input", args.input, "--gold", args.gold]
    for lines in args.lines or []:
        words += ["--lines", lines]
    return shlex.join(words)


def check_record(path: Path, direction: str) -> None:
    """A UserError unless `path` is the record of a model of `direction`."""
    from seq2seq.decoding.model_result import ModelResult

    recorded = ModelResult.load(path).direction
    if recorded != direction:
        raise UserError(f"--record {path}: a record of {recorded}; the model is {direction}")


def record_test(
    args: argparse.Namespace, count: int, direction: str, rule: str, scores: dict[str, dict]
) -> None:
    """Add `scores` of the `count` pairs of --gold to the --record FILE as its alignment_test."""
    from seq2seq.decoding.model_result import add_to_record

    test = {"gold": Path(args.gold).name, "pairs": count, "direction": direction, "rule": rule}
    test |= {"scores": scores, "command": alignment_command(args)}
    add_to_record(Path(args.record), "alignment_test", test)
    print(f"recorded the alignment test in {args.record}", file=sys.stderr)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    name = "standard input" if args.input is None else f"--input {args.input}"
    lines = read_input(args)
    ranges = [line_range(text, len(lines)) for text in args.lines or [None]]
    span = slice(min(r.start for r in ranges), max(r.stop for r in ranges))
    pairs = read_pairs(lines, name, args.swap)[span]
    gold = None
    if args.gold:
        gold = read_gold_lines(args.gold, len(lines), args.swap)[span]
        check_targets(pairs, name)
    forwards = load_aligners(args.checkpoint or args.model, args, args.rule, "--rule")
    forward = forwards[0]
    direction = "-".join(forward.translator.languages)
    if args.record:
        check_record(Path(args.record), direction)
    if args.grid:
        print_scores({"": summaries(grid(pairs, gold, forward, args))}, args.json)
        return
    reverses = []
    if args.reverse_model is not None:
        option = "--reverse-rule" if args.reverse_rule else "--rule"
        rules = [args.reverse_rule] * len(forwards) if args.reverse_rule else args.rule
        reverses = load_aligners(args.reverse_model, args, rules, option)
    rows = align_all(pairs, forwards, reverses, args, name)
    if gold is not None:
        scores = score_ranges(rows, gold, pairs, ranges, args)
        print_scores(scores, args.json)
        if args.record:
            record_test(args, len(lines), direction, str(forward.rule), scores)
        return
    for pair, alignment in zip(pairs, list(rows.values())[-1], strict=True):
        if args.swap:
            alignment = alignment.reversed()
        links = alignment.pharaoh()
        print(links if pair.tgt is not None else f"{' '.join(alignment.tgt_words)} ||| {links}")
