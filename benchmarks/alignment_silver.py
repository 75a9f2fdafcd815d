#!/usr/bin/env python3
"""Silver links of the Tatoeba test pairs: does a model's alignment head learn its teacher?

    benchmarks/alignment_silver.py --out data/silver          # ../shared/data/tatoeba-eng-fra
    .venv/bin/seq2seq align --model transformer-small.tatoeba.en-fr \\
        --rule mean --rule alignment-head \\
        --input data/silver/tatoeba-test.src-tgt --gold data/silver/tatoeba-test.gold

The Hansards gold scores attention on parliamentary debates, far from the everyday sentences
the Tatoeba models learn from. This script makes a gold for their own domain: the English-French
pairs of the Tatoeba test split (by both sides, as the shipped models' `prepare` splits them,
none of them a training pair), aligned by eflomal as the training teacher aligns the training
pairs (seq2seq.data.align_teacher): inside the whole corpus, on lowercased words, both
directions combined by their intersection. Every link is written as sure. They are the
teacher's links, not a human's: a head that scores well against them has learnt its teacher.

`--words` says what a word is: `spaces` (the default: the words of the text as it is, which
`seq2seq align` reads from the cased pairs written beside the gold, as training reads its
pairs) or `hansards` (lowercased, words and punctuation marks split, as the Hansards gold's
text is, and so written). eflomal samples at random, so two runs give links that differ a
little. Writes OUT/tatoeba-test.src-tgt (`source ||| target`, one pair a line) and
OUT/tatoeba-test.gold (Pharaoh `i-j`, from 1), and prints what each of eflomal's two directions
alone scores against those links.
"""

import argparse
import sys
from pathlib import Path

from seq2seq.data.corpora import Tatoeba
from seq2seq.data.word_links import COMBINATIONS, Link
from seq2seq.decoding.alignment import AlignmentScore, GoldLinks

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/, for its neighbours
from alignment_eflomal import WORDS, eflomal_links

ROOT = Path(__file__).resolve().parents[1]
HEURISTIC = "intersection"  # the teacher's (seq2seq.data.align_teacher)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared/data")
    parser.add_argument("--out", type=Path, required=True, help="the folder to write")
    parser.add_argument("--words", choices=("spaces", "hansards"), default="spaces")
    return parser.parse_args()


def words(text: str, style: str) -> list[str]:
    """The words of `text`: split on spaces, or as the Hansards gold's (lowercased, with
    punctuation marks split off)."""
    return text.split() if style == "spaces" else WORDS.findall(text.lower())


def main() -> None:
    args = parse_args()
    corpus = Tatoeba()
    path = args.data / corpus.mirror_folder / corpus.file.name
    if not path.is_file():
        print(
            f"error: --data {args.data}: no {corpus.mirror_folder}/{corpus.file.name}",
            file=sys.stderr,
        )
        sys.exit(2)
    try:
        import eflomal  # noqa: F401
    except ImportError:
        print("error: eflomal is not installed: .venv/bin/pip install eflomal", file=sys.stderr)
        sys.exit(2)
    rows = [
        (split, words(en, args.words), words(fr, args.words))
        for split, en, fr in corpus.pairs("en", "fr", {corpus.file.name: path})
    ]
    test = [(en, fr) for split, en, fr in rows if split == "test"]
    rest = [(en, fr) for split, en, fr in rows if split != "test"]
    lowered = [(" ".join(en).lower(), " ".join(fr).lower()) for en, fr in test + rest]
    forward, reverse = eflomal_links(lowered, len(test))
    silver = [COMBINATIONS[HEURISTIC](f, r) for f, r in zip(forward, reverse, strict=True)]
    args.out.mkdir(parents=True, exist_ok=True)
    pairs = "".join(f"{' '.join(en)} ||| {' '.join(fr)}\n" for en, fr in test)
    (args.out / "tatoeba-test.src-tgt").write_text(pairs, encoding="utf-8")
    gold = "".join(
        " ".join(f"{i + 1}-{j + 1}" for i, j in sorted(links)) + "\n" for links in silver
    )
    (args.out / "tatoeba-test.gold").write_text(gold, encoding="utf-8")
    print(f"wrote {len(test)} pairs and their {HEURISTIC} links to {args.out}")
    for direction, links in (("en-fr", forward), ("fr-en", reverse)):
        print(f"eflomal {direction} alone against them: {against(links, silver)}")


def against(links: list[set[Link]], silver: list[set[Link]]) -> str:
    """AER, precision and recall of `links` against the `silver` links, all sure: what one
    direction, one link per word as a model's rule, scores."""
    score = AlignmentScore()
    for found, sure in zip(links, silver, strict=True):
        score.add(found, GoldLinks(sure=sure, possible=sure))
    aer, precision, recall = (100 * value for value in (score.aer, score.precision, score.recall))
    return f"AER {aer:.1f}, precision {precision:.1f}, recall {recall:.1f}"


if __name__ == "__main__":
    main()
