#!/usr/bin/env python3
"""CTranslate2 against our engines, side by side on the same converted folder.

    benchmarks/ctranslate2_bench.py                          # every shipped Transformer
    benchmarks/ctranslate2_bench.py --sentences 100 --single 20 \
        --models transformer-tiny.multi30k.en-de

For each shipped Transformer: convert it once (seq2seq export --format ctranslate2) into a
temporary folder, then time on the first --sentences test sentences (Multi30k test2016, or
Tatoeba's test split), beam 5, each system in a fresh process of its own:

- `ctranslate2`: CTranslate2 called directly on the folder (sentencepiece, translate_batch with
  its own defaults, max_batch_size 128, sentencepiece back), fp32;
- `api-ct2`: `seq2seq.load(folder, engine="ctranslate2")`, fp32;
- `api-pytorch`: `seq2seq.load(name, engine="pytorch")`, fp32, without the number guard that
  the Tatoeba models decode with by default (CTranslate2 has none: the same search on both);
- `command-ct2`: `seq2seq translate --model folder --engine ctranslate2 --input FILE`, the
  whole command (its start included), batches only.

Measured: sentences/s in batches of 128, milliseconds per sentence one at a time (the first
--single sentences), the peak RSS of the process, and BLEU and chrF (sacreBLEU) of the batch
outputs; and every sentence whose best output differs between api-pytorch and api-ct2
(source, PyTorch's, CTranslate2's). Writes results/bench/ct2-<cpu>-<time>.json. A worker
process imports only what its system needs (CTranslate2 called directly: no torch), so its
peak RSS is that system's.
"""

import argparse
import gzip
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
MODELS = [
    "transformer-tiny.multi30k.en-de",
    "transformer-tiny.multi30k.de-en",
    "transformer-small.tatoeba.en-fr",
    "transformer-small.tatoeba.fr-en",
]
SYSTEMS = ["ctranslate2", "api-ct2", "api-pytorch", "command-ct2"]
BEAM = 5
BATCH = 128


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--sentences", type=int, default=1000, help="test sentences in batches")
    parser.add_argument("--single", type=int, default=100, help="sentences one at a time")
    parser.add_argument("--data", type=Path, default=DATA, help="the shared corpora")
    parser.add_argument("--out", type=Path, help="default: results/bench/ct2-<cpu>-<time>.json")
    parser.add_argument("--worker", nargs=4, metavar=("SYSTEM", "MODEL", "FOLDER", "INPUT"))
    return parser.parse_args()


def shipped_test_pairs(name: str, data: Path, count: int) -> tuple[list[str], list[str]]:
    """The first `count` test sources and references of a shipped model's corpus and
    direction: Multi30k test2016, or the pairs of Tatoeba's test split in file order."""
    src, tgt = name.rsplit(".", 1)[1].split("-")
    if ".multi30k." in name:
        sides = []
        for lang in (src, tgt):
            with gzip.open(data / "multi30k" / f"test_2016_flickr.{lang}.gz", "rt") as file:
                sides.append([line.strip() for line in itertools.islice(file, count)])
        return sides[0], sides[1]
    from seq2seq.data.corpora import Tatoeba

    tatoeba, sources, references = Tatoeba(), [], []
    with gzip.open(data / "tatoeba-eng-fra" / "fra.txt.gz", "rt", encoding="utf-8") as file:
        for line in file:
            en, fr = line.rstrip("\n").split("\t")[:2]
            if tatoeba.split_of(en.strip()) == "test" and len(sources) < count:
                by_lang = {"en": en.strip(), "fr": fr.strip()}
                sources.append(by_lang[src])
                references.append(by_lang[tgt])
    return sources, references


def direct_translate(folder: Path) -> Any:
    """CTranslate2 as its own documentation shows it: a function of lines to lines."""
    import ctranslate2
    import sentencepiece

    threads = len(os.sched_getaffinity(0))
    translator = ctranslate2.Translator(
        str(folder), device="cpu", compute_type="float32", intra_threads=threads
    )
    sp = sentencepiece.SentencePieceProcessor(model_file=str(folder / "sentencepiece.model"))

    def translate(lines: list[str]) -> list[str]:
        pieces = [[*tokens, "</s>"] for tokens in sp.encode(lines, out_type=str)]
        results = translator.translate_batch(pieces, beam_size=BEAM, max_batch_size=BATCH)
        return sp.decode([result.hypotheses[0] for result in results])

    return translate


def api_translate(system: str, name: str, folder: Path) -> Any:
    import seq2seq

    if system == "api-ct2":
        model = seq2seq.load(folder, device="cpu", precision="fp32", engine="ctranslate2")
    else:
        model = seq2seq.load(
            name, device="cpu", precision="fp32", engine="pytorch", keep_numbers=False
        )
    return lambda lines: model.translate(lines, beam=BEAM)


def worker(system: str, name: str, folder: Path, input_path: Path, single: int) -> dict:
    """One system in this process: batch and one-at-a-time timings, outputs, peak RSS."""
    lines = input_path.read_text(encoding="utf-8").splitlines()
    if system == "command-ct2":
        command = [sys.executable, "-m", "seq2seq", "translate", "--model", str(folder)]
        command += ["--engine", "ctranslate2", "--beam", str(BEAM), "--precision", "fp32"]
        start = time.perf_counter()
        done = subprocess.run(
            [*command, "--input", str(input_path)], capture_output=True, text=True, check=True
        )
        seconds = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        return {"batch_seconds": seconds, "outputs": done.stdout.splitlines(), "peak_mib": peak}
    if system == "ctranslate2":
        translate = direct_translate(folder)
    else:
        translate = api_translate(system, name, folder)
    translate(lines[:2])  # warm up: first-call allocations are not what a server pays
    start = time.perf_counter()
    outputs = translate(lines)
    batch_seconds = time.perf_counter() - start
    start = time.perf_counter()
    for line in lines[:single]:
        translate([line])
    single_seconds = time.perf_counter() - start
    return {
        "batch_seconds": batch_seconds,
        "single_ms": 1000 * single_seconds / single,
        "outputs": outputs,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def measure(name: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Every system on one model, each in a fresh process."""
    import sacrebleu

    from seq2seq.decoding.export import export_ctranslate2
    from seq2seq.decoding.model_folder import CARD, find_model
    from seq2seq.decoding.open_pytorch import load_model

    folder = tmp / name
    # compared without the number guard, which CTranslate2 lacks (as api_translate decodes)
    export_ctranslate2(load_model(name), folder, find_model(name) / CARD, keep_numbers=False)
    sources, references = shipped_test_pairs(name, args.data, args.sentences)
    input_path = tmp / f"{name}.src"
    input_path.write_text("\n".join(sources) + "\n", encoding="utf-8")
    results: dict[str, Any] = {"sentences": len(sources), "single": args.single}
    outputs_of = {}
    for system in SYSTEMS:
        command = [sys.executable, __file__, "--single", str(args.single)]
        command += ["--worker", system, name, str(folder), str(input_path)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        result = json.loads(done.stdout)
        outputs = outputs_of[system] = result.pop("outputs")
        result["sentences_per_s"] = len(sources) / result["batch_seconds"]
        result["bleu"] = round(sacrebleu.corpus_bleu(outputs, [references]).score, 2)
        result["chrf"] = round(sacrebleu.corpus_chrf(outputs, [references]).score, 2)
        results[system] = result
        print(name, system, {k: round(v, 2) for k, v in result.items()}, file=sys.stderr)
    pairs = zip(sources, outputs_of["api-pytorch"], outputs_of["api-ct2"], strict=True)
    results["best_differs"] = [list(pair) for pair in pairs if pair[1] != pair[2]]
    return results


def main() -> None:
    args = parse_args()
    if args.worker:
        system, name, folder, input_path = args.worker
        print(json.dumps(worker(system, name, Path(folder), Path(input_path), args.single)))
        return
    import torch
    from measure import bench_path, environment, write_record

    record: dict[str, Any] = {
        "kind": "ctranslate2",
        "environment": environment(torch.device("cpu")),
        "beam": BEAM,
        "batch": BATCH,
        "models": {},
    }
    import ctranslate2

    record["environment"]["ctranslate2"] = ctranslate2.__version__
    with tempfile.TemporaryDirectory(prefix="ct2-bench-") as tmp:
        for name in args.models:
            record["models"][name] = measure(name, args, Path(tmp))
    out = args.out or bench_path("ct2-", record["environment"]["device_name"])
    write_record(record, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
