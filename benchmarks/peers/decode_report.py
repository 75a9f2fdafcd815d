#!/usr/bin/env python3
"""The JSON of benchmarks/peers/decode.sh: beam-5 decoding speed and BLEU of each toolkit.

    decode_report.py WORK_DIR STEPS [--out FILE]   # default results/bench/peers-decode-*.json

Every toolkit's output is scored the same way: its sentencepiece pieces are turned back into
text by our sentencepiece model (ours has done it already) and sacreBLEU scores the text
against the test references of data/multi30k.en-de. Times are each toolkit's own clock around
its decoding loop, from its log.
"""

import argparse
import json
import re
from pathlib import Path
from typing import Any

import sentencepiece as spm
from common import default_out, peer_versions, record_header

from seq2seq.metrics import corpus_scores
from seq2seq.prepared import PreparedData

PREPARED = Path("data/multi30k.en-de")
RUNS = (1, 2)
FAIRSEQ_TIME = re.compile(r"Translated [\d,]+ sentences \([\d,]+ tokens\) in ([\d.]+)s")
ONMT_TIME = re.compile(r"Total translation time \(s\): ([\d.]+)")
PEAK_RSS = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")
ESCAPED = re.compile(r"<U\+([0-9A-F]{4})>")  # whitespace inside a piece, as pieces.py writes it


def detokenize(lines: list[str], model: spm.SentencePieceProcessor) -> list[str]:
    pieces = [ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), line).split() for line in lines]
    return [model.decode_pieces(line) for line in pieces]


def peak_rss_mib(path: Path) -> float:
    """The maximum resident set size in a /usr/bin/time -v report."""
    return int(PEAK_RSS.search(path.read_text(encoding="utf-8")).group(1)) / 1024


def fairseq_run(work: Path, run: int) -> tuple[float, float, list[str]]:
    """(seconds, peak RSS MiB, hypotheses in pieces in test order) of fairseq/decode<run>.log
    and fairseq/decode-time<run>.log."""
    log = (work / "fairseq" / f"decode{run}.log").read_text(encoding="utf-8")
    hypotheses = {}
    for line in log.splitlines():
        if line.startswith("H-"):
            index, _score, text = line[2:].split("\t", 2)
            hypotheses[int(index)] = text
    seconds = float(FAIRSEQ_TIME.search(log).group(1))
    peak = peak_rss_mib(work / "fairseq" / f"decode-time{run}.log")
    return seconds, peak, [hypotheses[i] for i in sorted(hypotheses)]


def onmt_run(work: Path, run: int) -> tuple[float, float, list[str]]:
    """(seconds, peak RSS MiB, hypotheses in pieces) of onmt/decode<run>.log,
    onmt/decode-time<run>.log and onmt/test<run>.de."""
    log = (work / "onmt" / f"decode{run}.log").read_text(encoding="utf-8")
    output = (work / "onmt" / f"test{run}.de").read_text(encoding="utf-8").splitlines()
    peak = peak_rss_mib(work / "onmt" / f"decode-time{run}.log")
    return float(ONMT_TIME.search(log).group(1)), peak, output


def ours_run(work: Path, precision: str, run: int) -> tuple[float, float]:
    """(beam-5 decoding seconds, peak RSS MiB) of ours-<precision>-decode<run>.json, written by
    benchmarks/bench.py."""
    record = json.loads((work / f"ours-{precision}-decode{run}.json").read_text(encoding="utf-8"))
    decoding = record["models"][0]["decoding"]
    (beam,) = decoding["beams"]
    return beam["seconds"], decoding["memory"]["peak_mib"]


def toolkit(
    name: str,
    version: str,
    runs: list[tuple[float, float]],
    texts: list[str],
    references: list[str],
) -> dict[str, Any]:
    """One toolkit's figures: BLEU of its output, and the speed and peak memory of each run
    (`runs`: seconds and peak RSS MiB)."""
    scores = corpus_scores(texts, references)
    words = sum(len(text.split()) for text in texts)
    return {
        "name": name,
        "version": version,
        "bleu": round(scores.bleu, 2),
        "bleu_lc": round(scores.bleu_lc, 2),
        "chrf": round(scores.chrf, 2),
        "signatures": scores.signatures,
        "output_words": words,
        "seconds": [round(seconds, 2) for seconds, _ in runs],
        "sentences_per_second": [round(len(texts) / seconds, 1) for seconds, _ in runs],
        "peak_rss_mib": [round(peak, 1) for _, peak in runs],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path, help="the WORK_DIR of decode.sh")
    parser.add_argument("steps", type=int, help="the updates each model was trained for")
    parser.add_argument("--out", type=Path, help="the JSON file")
    args = parser.parse_args()
    work: Path = args.work
    model = spm.SentencePieceProcessor(model_file=str(PREPARED / "spm.model"))
    fairseq_version, onmt_version = peer_versions(work)
    fairseq = [fairseq_run(work, run) for run in RUNS]
    onmt = [onmt_run(work, run) for run in RUNS]
    _, references = PreparedData.load(PREPARED).lines("test")
    header = record_header("peers-decode")
    record = {
        **header,
        "train_steps": args.steps,
        "reproduce": f"bash benchmarks/peers/decode.sh ../peers {args.steps}",
        "setup": (
            "Transformer 3+3 layers, d_model 256, FFN 1024, 4 heads, shared embeddings, trained "
            f"{args.steps} updates in each toolkit with the same schedule (warmup to 1e-3 over "
            "400 updates, inverse square root), batches of about 2,500 target tokens, Multi30k "
            "en-de in our joint 8k sentencepiece pieces; decoding the 1000 test sentences: beam "
            "5, 128 sentences a batch, the peers in fp32, ours in its default decode.precision "
            "(auto: bf16 autocast on a CPU with AVX512_BF16 or AMX) and in int8 (int8 linear "
            "layers, the rest fp32)"
        ),
        "method": (
            "Two decoding runs per toolkit; times from each toolkit's own clock around its "
            "decoding loop (fairseq-generate 'Translated ... in Xs', onmt_translate "
            "-report_time 'Total translation time', ours benchmarks/bench.py), model loading "
            "excluded. Peak RSS: the maximum resident set size of each decoding process "
            "(the peers' from /usr/bin/time -v, ours from benchmarks/bench.py, whose decoding "
            "runs in a process of its own). BLEU: every output detokenized by our sentencepiece "
            "model and scored by sacreBLEU against the same references."
        ),
        "toolkits": [
            toolkit(
                "fairseq",
                fairseq_version,
                [(seconds, peak) for seconds, peak, _ in fairseq],
                detokenize(fairseq[0][2], model),
                references,
            ),
            toolkit(
                "OpenNMT-py",
                onmt_version,
                [(seconds, peak) for seconds, peak, _ in onmt],
                detokenize(onmt[0][2], model),
                references,
            ),
            *(
                toolkit(
                    name,
                    header["git_revision"][:10],
                    [ours_run(work, precision, run) for run in RUNS],
                    (work / "ours" / f"test.{precision}.de").read_text("utf-8").splitlines(),
                    references,
                )
                for name, precision in (
                    ("seq2seq (ours)", "auto"),
                    ("seq2seq (ours), int8", "int8"),
                )
            ),
        ],
    }
    out = args.out or default_out("peers-decode")
    out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(out)


if __name__ == "__main__":
    main()
