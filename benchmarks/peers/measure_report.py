#!/usr/bin/env python3
"""The JSON of benchmarks/peers/measure.sh: training speed and peak memory of each toolkit.

    measure_report.py WORK_DIR [--out FILE]   # default results/bench/peers-<device>-<time>.json

Each run trains 40 updates; the figures cover updates 11-40. The peers' speed comes from their
own interval logs (fairseq --log-format json: `wpb` target tokens per batch and `wps` target
tokens/s; OpenNMT-py: `bsz: src/tgt/sents` and `src/tgt tok/s`): the time of the window is the
sum over its intervals of tokens / speed. Their peak memory is /usr/bin/time -v's maximum
resident set size. Ours comes from benchmarks/bench.py's JSON (its own clock and getrusage).
"""

import argparse
import json
import re
from pathlib import Path
from typing import Any

from common import peer_versions
from measure import default_out, record_header, write_record

RUNS = (1, 2)
WARMUP, TIMED = 10, 30
ONMT_LINE = re.compile(
    r"Step\s+(\d+)/\s*\d+;.*?bsz:\s*\d+/\s*(\d+)/\s*\d+;\s*[\d.]+/\s*([\d.]+) tok/s"
)
PEAK_RSS = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")


def intervals(kind: str, log: str) -> list[tuple[int, float, float]]:
    """(step at the end of the interval, target tokens per step, target tokens/s) per line."""
    found = []
    for line in log.splitlines():
        if kind == "fairseq":
            match = re.search(r"\{.*\}", line)
            if "train_inner" in line and match:
                record = json.loads(match.group(0))
                found.append((int(record["num_updates"]), record["wpb"], record["wps"]))
        elif match := ONMT_LINE.search(line):
            found.append((int(match.group(1)), float(match.group(2)), float(match.group(3))))
    return [(step, float(tokens), float(speed)) for step, tokens, speed in found]


def peer_run(work: Path, kind: str, run: int) -> dict[str, float]:
    """Speed over updates WARMUP+1..WARMUP+TIMED and peak RSS of WORK/<kind>/run<run>.log."""
    folder = work / kind
    steps = tokens = seconds = 0.0
    previous = 0
    for step, tokens_per_step, speed in intervals(kind, (folder / f"run{run}.log").read_text()):
        count, previous = step - previous, step
        if WARMUP < step <= WARMUP + TIMED:
            steps += count
            tokens += tokens_per_step * count
            seconds += tokens_per_step * count / speed
    peak = PEAK_RSS.search((folder / f"time{run}.log").read_text())
    return {
        "tgt_tokens": tokens,
        "steps": steps,
        "seconds": seconds,
        "peak_rss_mib": int(peak.group(1)) / 1024,
    }


def ours_run(work: Path, precision: str, run: int) -> dict[str, Any]:
    record = json.loads((work / f"ours-{precision}{run}.json").read_text(encoding="utf-8"))
    training = record["models"][0]["training"]
    return {
        "tgt_tokens": training["tgt_tokens"],
        "steps": training["steps"],
        "seconds": training["seconds"],
        "peak_rss_mib": training["memory"]["peak_mib"],
        "precision": training["precision"],
    }


def toolkit(name: str, version: str, runs: list[dict[str, Any]], notes: str) -> dict[str, Any]:
    peaks = [run["peak_rss_mib"] for run in runs]
    return {
        "name": name,
        "version": version,
        "warmup_steps": WARMUP,
        "timed_steps": TIMED,
        "tgt_tokens_per_step": round(
            sum(r["tgt_tokens"] for r in runs) / sum(r["steps"] for r in runs), 1
        ),
        "tgt_tokens_per_second": [round(r["tgt_tokens"] / r["seconds"], 1) for r in runs],
        "steps_per_second": [round(r["steps"] / r["seconds"], 4) for r in runs],
        "peak_rss_mib": round(max(peaks), 1),
        "peak_rss_mib_per_run": [round(peak, 1) for peak in peaks],
        "notes": notes,
    }


def ours_toolkit(work: Path, precision: str, version: str) -> dict[str, Any]:
    """Ours, trained with train.precision `precision` (the name says what it ran in)."""
    runs = [ours_run(work, precision, run) for run in RUNS]
    notes = (
        "transformer-small preset, AdamW wd 1e-4, clip 1.0, token batches of 2,800 padded "
        f"tokens, train.precision {precision}"
    )
    return toolkit(f"seq2seq (ours), {runs[0]['precision']}", version, runs, notes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path, help="the WORK_DIR of measure.sh")
    parser.add_argument("--out", type=Path, help="the JSON file")
    args = parser.parse_args()
    work: Path = args.work
    fairseq_version, onmt_version = peer_versions(work, "fairseq-fixed", "OpenNMT-py")
    header = record_header("peers")
    record = {
        **header,
        "setup": (
            "Transformer 3+3 layers, d_model 256, FFN 1024, 4 heads, shared embeddings, Multi30k "
            "en-de in our joint 8k sentencepiece pieces, token batches of about 2,500 target "
            "tokens, label smoothing 0.1; the peers in fp32 (fairseq documents --bf16 as "
            "'implies --tpu'; OpenNMT-py 3.5.1's model_dtype is fp32 or fp16 only), ours in fp32 "
            "and in its default precision (bf16 autocast on a CPU with AVX512_BF16 or AMX)"
        ),
        "reproduce": "bash benchmarks/peers/measure.sh",
        "method": (
            f"Each run: {WARMUP + TIMED} updates, the first {WARMUP} untimed, figures over the "
            f"next {TIMED}. Peers: from their own interval logs (window time = sum of interval "
            "target tokens / interval target tokens/s); ours: benchmarks/bench.py's clock over "
            "the timed steps. Target tokens: the non-pad target tokens of the loss in all three. "
            "Peak RSS: /usr/bin/time -v of the peer's training process (start-up included); "
            "ours: getrusage of its measuring process."
        ),
        "toolkits": [
            toolkit(
                "fairseq",
                fairseq_version,
                [peer_run(work, "fairseq", r) for r in RUNS],
                "fairseq-train as in measure.sh, --max-tokens 2800",
            ),
            toolkit(
                "OpenNMT-py",
                onmt_version,
                [peer_run(work, "onmt", r) for r in RUNS],
                "onmt_train -config benchmarks/peers/onmt.yaml (batch_size 3000 tokens)",
            ),
            ours_toolkit(work, "fp32", header["git_revision"][:10]),
            ours_toolkit(work, "auto", header["git_revision"][:10]),
        ],
    }
    out = args.out or default_out("peers")
    write_record(record, out)
    print(out)


if __name__ == "__main__":
    main()
