#!/usr/bin/env python3
"""The statistical baseline: eflomal's AER on the Hansards gold, beside attention's.

    .venv/bin/pip install eflomal                     # GPLv3, built with a C compiler
    benchmarks/alignment_eflomal.py                   # ../shared/data: Hansards + Tatoeba

eflomal (Östling and Tiedemann 2016; PyPI `eflomal`, the maintained successor of efmaral) is a
Bayesian IBM-model aligner that learns from the corpus it aligns, so it aligns the 447 Hansards
pairs (../shared/data/alignment) inside a larger corpus: the Hansards alone, and the Hansards
followed by every pair of the Tatoeba English-French corpus (../shared/data/tatoeba-eng-fra,
167,130 pairs, lowercased and split into words and punctuation marks as the Hansards are). It
aligns both directions; they are combined with the heuristics of `seq2seq align --combine`
(seq2seq.decoding.alignment), the heuristic chosen on lines 1-100 and reported on 101-447
and all 447, as benchmarks/alignment_aer.py does for attention. eflomal samples at random (no
seed), so a run's figures differ from another's by a few tenths.

The published figure on the same 447 pairs, eflomal 8.2, aligns them inside the 1.1 million
sentences of the Hansards training data. Writes results/alignment/eflomal-<cpu>.json.
"""

import argparse
import gzip
import json
import os
import re
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import torch

from seq2seq.data.align_teacher import read_pharaoh
from seq2seq.data.word_links import COMBINATIONS
from seq2seq.decoding.alignment import read_gold
from seq2seq.decoding.model_result import git_state
from seq2seq.files import read_lines

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/, for its neighbours
from alignment_aer import scores
from measure import device_name

ROOT = Path(__file__).resolve().parents[1]
CHOOSE = "lines 1-100"
WORDS = re.compile(r"\w+'|\w+(?:-\w+)*|[^\w\s]")  # "l'homme" -> "l'" "homme"; "!" alone


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared/data")
    parser.add_argument("--out", type=Path, help="the JSON record")
    return parser.parse_args()


def tatoeba_pairs(path: Path) -> list[tuple[str, str]]:
    """The Tatoeba pairs, lowercased, words and punctuation marks split by spaces."""
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        pairs = [line.rstrip("\n").split("\t")[:2] for line in lines]
    return [tuple(" ".join(WORDS.findall(side.lower())) for side in pair) for pair in pairs]


def eflomal_links(pairs: list[tuple[str, str]], count: int) -> tuple[list, list]:
    """eflomal's forward and reverse links of the first `count` pairs, as (source, target)."""
    import eflomal

    with tempfile.TemporaryDirectory() as folder:
        src, tgt = Path(folder, "src"), Path(folder, "tgt")
        src.write_text("".join(f"{s}\n" for s, _ in pairs), encoding="utf-8")
        tgt.write_text("".join(f"{t}\n" for _, t in pairs), encoding="utf-8")
        forward, reverse = Path(folder, "forward"), Path(folder, "reverse")
        with open(src, encoding="utf-8") as src_lines, open(tgt, encoding="utf-8") as tgt_lines:
            eflomal.Aligner().align(src_lines, tgt_lines, str(forward), str(reverse))
        return [read_pharaoh(path)[:count] for path in (forward, reverse)]


def corpus_record(pairs: list[tuple[str, str]], gold: list) -> dict:
    """eflomal's AER on the gold lines (the first of `pairs`), each direction and combined."""
    start = time.perf_counter()
    forward, reverse = eflomal_links(pairs, len(gold))
    by_heuristic = {
        heuristic: scores([combine(f, r) for f, r in zip(forward, reverse, strict=True)], gold)
        for heuristic, combine in COMBINATIONS.items()
    }
    chosen = min(by_heuristic, key=lambda name: by_heuristic[name][CHOOSE]["aer"])
    return {
        "pairs": len(pairs),
        "seconds": round(time.perf_counter() - start, 1),
        "en-fr": scores(forward, gold),
        "fr-en": scores(reverse, gold),
        "chosen": chosen,
        "heuristics": by_heuristic,
    }


def main() -> None:
    args = parse_args()
    try:
        import eflomal  # noqa: F401
    except ImportError:
        print("error: eflomal is not installed: .venv/bin/pip install eflomal", file=sys.stderr)
        sys.exit(2)
    gold_dir = args.data / "alignment"
    lines = read_lines(gold_dir / "hansards.en-fr.src-tgt")
    hansards = [tuple(side.strip() for side in line.split("|||")) for line in lines]
    gold = read_gold(gold_dir / "hansards.en-fr.gold", read_lines(gold_dir / "hansards.en-fr.gold"))
    tatoeba = tatoeba_pairs(args.data / "tatoeba-eng-fra" / "fra.txt.gz")
    revision, _ = git_state()
    device = device_name(torch.device("cpu"))
    record = {
        "kind": "alignment_eflomal",
        "aligner": "eflomal " + version("eflomal"),
        "chosen_on": CHOOSE,
        "device": f"{device} ({os.cpu_count()} cores), CPU only",
        "git_revision": revision,
        "hansards": corpus_record(hansards, gold),
        "hansards+tatoeba": corpus_record(hansards + tatoeba, gold),
    }
    slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")
    out = args.out or ROOT / "results/alignment" / f"eflomal-{slug[:40]}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    for corpus in ("hansards", "hansards+tatoeba"):
        part = record[corpus]
        best = part["heuristics"][part["chosen"]]["all 447"]["aer"]
        print(
            f"{corpus}: en-fr {part['en-fr']['all 447']['aer']}, fr-en "
            f"{part['fr-en']['all 447']['aer']}, {part['chosen']} {best} (all 447)"
        )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
