#!/usr/bin/env python3
"""Decode space-separated sentencepiece pieces with a CTranslate2 model, for decode.sh.

    ct2_decode.py MODEL_DIR SOURCE OUTPUT REPORT --batch-size N   # run with WORK/venv/bin/python

Writes the best hypothesis of each source line to OUTPUT, in pieces and in source order, and to
REPORT a JSON object: the seconds of the decoding loop (model loading and a warm-up excluded)
and of each batch. On the CPU, 2 threads, int8 weights; beam 5, ranked as fairseq ranks them.
"""

import argparse
import json
import time
from pathlib import Path

import ctranslate2

BEAM_SIZE = 5
MAX_LEN_A, MAX_LEN_B = 1.5, 10  # the others' limit: 1.5 x source length + 10 pieces
WARMUP_SENTENCES = 16  # decoded greedily first and untimed, as benchmarks/bench.py does


def max_decoding_length(batch: list[list[str]]) -> int:
    """The others' length limit for the longest source of `batch` (its length counting the end
    of sentence, as fairseq and ours count it), plus one. CTranslate2 takes one limit per call,
    as fairseq takes one per batch (ours: one per sentence), and counts the end of sentence in
    it: fairseq generates at most int(1.5 x length + 10) pieces and then the end of sentence, as
    many steps as this limit. At the last step fairseq forces the end of sentence, where
    CTranslate2 keeps whichever piece scores best."""
    return max(int(MAX_LEN_A * (len(pieces) + 1) + MAX_LEN_B) for pieces in batch) + 1


def decode(
    translator: ctranslate2.Translator, sources: list[list[str]], batch_size: int
) -> tuple[list[list[str]], list[float]]:
    """The best hypothesis of each source in source order, and the seconds of each batch.

    Batches are `batch_size` sources of about the same length, longest first, as ours are.
    Scores are normalized by the hypothesis length with the end of sentence counted (CTranslate2
    keeps it in the hypothesis until after ranking), the mean log-probability per piece that
    fairseq ranks by with its default --lenpen 1; patience 1: a sentence ends when beam size
    hypotheses have ended, as in fairseq.
    """
    order = sorted(range(len(sources)), key=lambda i: -len(sources[i]))
    outputs: list[list[str]] = [[] for _ in sources]
    seconds = []
    for first in range(0, len(order), batch_size):
        indices = order[first : first + batch_size]
        batch = [sources[i] for i in indices]
        start = time.perf_counter()
        results = translator.translate_batch(
            batch,
            max_batch_size=batch_size,
            beam_size=BEAM_SIZE,
            patience=1,
            length_penalty=1,
            max_decoding_length=max_decoding_length(batch),
        )
        seconds.append(time.perf_counter() - start)
        for i, result in zip(indices, results, strict=True):
            outputs[i] = result.hypotheses[0]
    return outputs, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="the folder of ct2-fairseq-converter's model")
    parser.add_argument("source", type=Path, help="source pieces, one sentence a line")
    parser.add_argument("output", type=Path, help="the hypotheses, in pieces")
    parser.add_argument("report", type=Path, help="the JSON of the times")
    parser.add_argument("--batch-size", type=int, required=True, help="sentences a batch")
    args = parser.parse_args()
    sources = [line.split() for line in args.source.read_text(encoding="utf-8").splitlines()]
    translator = ctranslate2.Translator(
        args.model, device="cpu", compute_type="int8", intra_threads=2, inter_threads=1
    )
    translator.translate_batch(sources[:WARMUP_SENTENCES], beam_size=1)
    start = time.perf_counter()
    outputs, batch_seconds = decode(translator, sources, args.batch_size)
    seconds = time.perf_counter() - start
    text = "".join(" ".join(pieces) + "\n" for pieces in outputs)
    args.output.write_text(text, encoding="utf-8")
    report = {"seconds": seconds, "batch_seconds": batch_seconds}
    args.report.write_text(json.dumps(report) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
