#!/usr/bin/env python3
"""Does a repetition guard help? Test-set BLEU and chrF with and without one.

    benchmarks/repetition.py --model transformer-tiny.multi30k.en-de \
        --model transformer-tiny.multi30k.de-en

Each model decodes the test split of its prepared corpus (`make data` first, in its direction)
once per guard setting: none, `decode.no_repeat_ngram` = 2, 3, 4 (a token may not repeat an
n-gram of the output) and `decode.max_piece_repeat` = 2, 3 (a piece may not come more than r
times in a row). Beam 5, fp32, through the translator that seq2seq evaluate uses. Prints one
markdown table: the scores, and how many outputs repeat a word at once ("Sie Sie") against how
many references do; the guards change only the outputs, so that count says what they hide.
"""

import argparse
import itertools
import shlex
import sys
from dataclasses import dataclass

from seq2seq.commands.cli import ArgumentParser, run_cli
from seq2seq.data.prepared_corpus import PreparedData
from seq2seq.decoding.evaluation import evaluate
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.decoding.torch_translator import Translator


@dataclass(frozen=True)
class Guard:
    label: str
    no_repeat_ngram: int = 0
    max_piece_repeat: int = 0


GUARDS = [
    Guard("none"),
    Guard("no_repeat_ngram = 2", no_repeat_ngram=2),
    Guard("no_repeat_ngram = 3", no_repeat_ngram=3),
    Guard("no_repeat_ngram = 4", no_repeat_ngram=4),
    Guard("max_piece_repeat = 2", max_piece_repeat=2),
    Guard("max_piece_repeat = 3", max_piece_repeat=3),
]


def doubled_words(lines: list[str]) -> int:
    """How many lines repeat a word at once ("Sie Sie"), case-insensitively."""
    count = 0
    for line in lines:
        words = line.lower().split()
        count += any(a == b for a, b in itertools.pairwise(words))
    return count


def rows(model: str, beam: int) -> list[list[str]]:
    """One table row per guard for the exported model `model`."""
    inference = load_model(model, "cpu", kind="exported")
    prepared = PreparedData.load(inference.config.data.prepared)
    sources, references = prepared.lines("test")
    decode = inference.config.decode
    decode.beam_size, decode.precision = beam, "fp32"
    table = []
    for guard in GUARDS:
        decode.no_repeat_ngram, decode.max_piece_repeat = (
            guard.no_repeat_ngram,
            guard.max_piece_repeat,
        )
        result = evaluate(Translator.from_inference(inference, "cpu"), sources, references)
        print(
            f"{model}, {guard.label}: BLEU {result.bleu:.2f}, chrF {result.chrf:.2f}",
            file=sys.stderr,
        )
        corpus = f"{prepared.manifest['corpus']} {prepared.src}-{prepared.tgt}"
        table.append(
            [
                f"{model} ({corpus})",
                guard.label,
                f"{result.bleu:.2f}",
                f"{result.chrf:.2f}",
                f"{doubled_words(result.hypotheses)} ({doubled_words(references)})",
            ]
        )
    return table


def main() -> None:
    parser = ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", action="append", required=True, help="an exported model (repeat the option)"
    )
    parser.add_argument("--beam", type=int, default=5, help="beam size (default: 5)")
    args = parser.parse_args()
    table = [row for model in args.model for row in rows(model, args.beam)]
    header = ["Model (test set)", "Guard", "BLEU", "chrF", "Doubled words (references)"]
    print(f"`{shlex.join(['benchmarks/repetition.py', *sys.argv[1:]])}`, beam {args.beam}, fp32")
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in table:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    run_cli(main, tune=True)
