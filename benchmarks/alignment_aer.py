#!/usr/bin/env python3
"""The alignment error rate (AER) of the shipped English-French Transformers on the Hansards gold.

    benchmarks/alignment_aer.py                       # ../shared/data/alignment, all 447 pairs
    benchmarks/alignment_aer.py --gold-dir DIR --out results/alignment/aer.json

The gold (../shared/data/alignment/README.md) is the test set of the NAACL 2003 shared task:
447 English-French sentence pairs with sure and possible links. The shipped models that
translate between English and French are transformer-small.tatoeba.en-fr and .fr-en (the
Multi30k ones are English-German): each teacher-forces every pair once, English to French or
French to English, and every rule of `seq2seq align --grid` (each head of each layer, each
layer's mean, the mean of all; each also shifted) is scored from those maps. Then the two
directions are combined with each heuristic of `seq2seq align --combine`, both with the mean
rule and with the rule each direction chose.

Every setting is chosen on lines 1-100 alone (the rule of each direction, the combination
heuristic), and reported on lines 101-447 and on all 447, as the gold's README asks. The figures
are those that `seq2seq align --gold` prints for the same settings (the record lists the
commands). Writes a JSON record (default results/alignment/aer-<cpu>.json) naming the CPU.
"""

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

import torch

from seq2seq.data.word_links import COMBINATIONS, Link
from seq2seq.decoding.alignment import (
    Aligner,
    AlignmentScore,
    GoldLinks,
    PairMaps,
    read_gold,
    rules_of,
    turned,
)
from seq2seq.decoding.model_result import git_state
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.decoding.torch_translator import Translator
from seq2seq.files import read_lines

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/, for measure.py
from measure import device_name

ROOT = Path(__file__).resolve().parents[1]
FORWARD, REVERSE = "transformer-small.tatoeba.en-fr", "transformer-small.tatoeba.fr-en"
SPLITS = {"lines 1-100": range(0, 100), "lines 101-447": range(100, 447), "all 447": range(447)}
CHOOSE = "lines 1-100"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gold-dir", type=Path, default=ROOT.parent / "shared/data/alignment")
    parser.add_argument("--out", type=Path, help="the JSON record")
    return parser.parse_args()


def teacher_forced(aligner: Aligner, pairs: list[tuple[str, str]]) -> tuple[list[PairMaps], list]:
    """The maps of every pair, and the seconds each took."""
    all_maps, seconds = [], []
    for src, tgt in pairs:
        start = time.perf_counter()
        all_maps.append(aligner.maps(*aligner.ids(src, tgt)))
        seconds.append(time.perf_counter() - start)
    return all_maps, seconds


def links_of_rules(all_maps: list[PairMaps], reverse: bool) -> dict[str, list[set[Link]]]:
    """Each grid rule's links of every pair, as (English, French) links."""
    rules = [*rules_of(all_maps[0].maps), *rules_of(all_maps[0].maps, shifted=True)]
    found = {}
    for rule in rules:
        links = [maps.align(rule).links for maps in all_maps]
        found[str(rule)] = [turned(pair) for pair in links] if reverse else links
    return found


def scores(links: list[set[Link]], gold: list[GoldLinks]) -> dict[str, dict]:
    """AER, precision and recall of `links` on each split."""
    summaries = {}
    for split, lines in SPLITS.items():
        total = AlignmentScore()
        for line in lines:
            total.add(links[line], gold[line])
        summaries[split] = total.summary()
    return summaries


def best(scored: dict[str, dict[str, dict]]) -> str:
    """The key of `scored` with the lowest AER on CHOOSE."""
    return min(scored, key=lambda key: scored[key][CHOOSE]["aer"])


def direction(name: str, pairs: list[tuple[str, str]], gold: list[GoldLinks], reverse: bool):
    """One model's record, and each rule's links."""
    device = torch.device("cpu")
    aligner = Aligner(Translator.from_inference(load_model(name, device), device))
    all_maps, seconds = teacher_forced(aligner, pairs)
    links = links_of_rules(all_maps, reverse)
    by_rule = {rule: scores(rule_links, gold) for rule, rule_links in links.items()}
    chosen = best(by_rule)
    record = {
        "model": name,
        "mean": by_rule["mean"],
        "chosen_rule": chosen,
        "chosen": by_rule[chosen],
        "grid": by_rule,
        "median_ms_per_pair": round(1000 * statistics.median(seconds), 1),
    }
    return record, links


def combined(forward: dict, reverse: dict, rules: tuple[str, str], gold: list[GoldLinks]) -> dict:
    """Every heuristic of the two directions' links by `rules`, and the one chosen."""
    by_heuristic = {}
    for heuristic, combine in COMBINATIONS.items():
        pairs = zip(forward[rules[0]], reverse[rules[1]], strict=True)
        by_heuristic[heuristic] = scores([combine(f, r) for f, r in pairs], gold)
    chosen = best(by_heuristic)
    return {"rules": list(rules), "chosen": chosen, "heuristics": by_heuristic}


def commands(gold_dir: Path, en_fr: dict, fr_en: dict, chosen: str) -> list[str]:
    """The `seq2seq align` commands that print the record's figures, run from the repository
    root (`gold_dir` relative to it: ../shared/data/alignment by default)."""
    gold_dir = Path(os.path.relpath(gold_dir, ROOT))
    data = f"--input {gold_dir}/hansards.en-fr.src-tgt --gold {gold_dir}/hansards.en-fr.gold"
    both = f"--model {FORWARD} --reverse-model {REVERSE}"
    rules = f"--rule {en_fr['chosen_rule']} --reverse-rule {fr_en['chosen_rule']}"
    return [
        f"seq2seq align --model {FORWARD} {data}",
        f"seq2seq align --model {FORWARD} {data} --grid",
        f"seq2seq align --model {REVERSE} {data} --swap --grid",
        f"seq2seq align {both} {data} --combine grow-diag-final",
        f"seq2seq align {both} {rules} {data} --combine {chosen}",
    ]


def main() -> None:
    args = parse_args()
    torch.set_num_threads(2)
    lines = read_lines(args.gold_dir / "hansards.en-fr.src-tgt")
    pairs = [tuple(side.strip() for side in line.split("|||")) for line in lines]
    gold_path = args.gold_dir / "hansards.en-fr.gold"
    gold = read_gold(gold_path, read_lines(gold_path))
    start = time.perf_counter()
    en_fr, en_fr_links = direction(FORWARD, pairs, gold, reverse=False)
    fr_en, fr_en_links = direction(REVERSE, [(f, e) for e, f in pairs], gold, reverse=True)
    mean = combined(en_fr_links, fr_en_links, ("mean", "mean"), gold)
    chosen_rules = (en_fr["chosen_rule"], fr_en["chosen_rule"])
    chosen = combined(en_fr_links, fr_en_links, chosen_rules, gold)
    revision, _ = git_state()
    record = {
        "kind": "alignment_aer",
        "gold": "Hansards en-fr, 447 pairs (NAACL 2003), sure and possible links",
        "chosen_on": CHOOSE,
        "device": f"{device_name(torch.device('cpu'))} ({os.cpu_count()} cores), CPU only",
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "git_revision": revision,
        "seconds": round(time.perf_counter() - start, 1),
        "en-fr": en_fr,
        "fr-en": fr_en,
        "combined_mean": mean,
        "combined_chosen": chosen,
        "commands": commands(args.gold_dir, en_fr, fr_en, chosen["chosen"]),
    }
    slug = re.sub(r"[^a-z0-9]+", "-", device_name(torch.device("cpu")).lower()).strip("-")
    out = args.out or ROOT / "results/alignment" / f"aer-{slug[:40]}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    for name in ("en-fr", "fr-en"):
        part = record[name]
        print(
            f"{name} mean {part['mean']['all 447']['aer']}, {part['chosen_rule']} "
            f"{part['chosen']['all 447']['aer']} (all 447)"
        )
    for name in ("combined_mean", "combined_chosen"):
        part = record[name]
        print(
            f"{name} {part['rules']} {part['chosen']} "
            f"{part['heuristics'][part['chosen']]['all 447']['aer']} (all 447)"
        )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
