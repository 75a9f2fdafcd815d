#!/usr/bin/env python3
"""The JSON of benchmarks/peers/decode.sh: beam-5 decoding speed and BLEU of each toolkit.

    decode_report.py WORK_DIR STEPS [--out FILE]   # default results/bench/peers-decode-*.json

Every toolkit's output is scored the same way: its sentencepiece pieces are turned back into
text by our sentencepiece model (ours has done it already) and sacreBLEU scores the text
against the test references of data/multi30k.en-de; its output pieces are counted by encoding
that text with the same model. Batch-128 times are each toolkit's own clock around its
decoding loop, from its log or JSON; batch-1 times are those of each sentence (decode.sh says
how each is taken). The ratios compare ours with CTranslate2 and with the fastest PyTorch peer.
"""

import argparse
import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sentencepiece as spm
from common import peer_versions
from measure import default_out, record_header, write_record

from seq2seq.data.prepared_corpus import PreparedData
from seq2seq.decoding.scores import corpus_scores

PREPARED = Path("data/multi30k.en-de")
RUNS = (1, 2)
FAIRSEQ_TIME = re.compile(r"Translated [\d,]+ sentences \([\d,]+ tokens\) in ([\d.]+)s")
ONMT_TIME = re.compile(r"Total translation time \(s\): ([\d.]+)")
PEAK_RSS = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")
ESCAPED = re.compile(r"<U\+([0-9A-F]{4})>")  # whitespace inside a piece, as pieces.py writes it
CTRANSLATE2 = "CTranslate2"
PYTORCH_PEERS = ("fairseq", "OpenNMT-py")
OURS = (("seq2seq (ours)", "auto"), ("seq2seq (ours), int8", "int8"))
# The figures that the ratios compare (lower is faster), each the mean of the runs.
RATIO_MEASURES = ("ms_per_output_piece", "batch1_mean_ms", "batch1_median_ms")


@dataclass
class Measured:
    """A toolkit's runs: the test set in batches of 128 ("decode") and its first sentences one
    at a time ("single")."""

    seconds: list[float]  # batch 128: the decoding time of each run
    peak_rss_mib: list[float]
    single_seconds: list[list[float]]  # batch 1: each run's time per sentence
    single_peak_rss_mib: list[float]
    texts: list[str]  # the batch-128 output, detokenized


def detokenize(lines: list[str], model: spm.SentencePieceProcessor) -> list[str]:
    pieces = [ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), line).split() for line in lines]
    return [model.decode_pieces(line) for line in pieces]


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def peak_rss_mib(path: Path) -> float:
    """The maximum resident set size in a /usr/bin/time -v report."""
    return int(PEAK_RSS.search(path.read_text(encoding="utf-8")).group(1)) / 1024


def fairseq_hypotheses(log: str) -> list[str]:
    """The hypotheses of a fairseq-generate log, in pieces and in test order."""
    hypotheses = {}
    for line in log.splitlines():
        if line.startswith("H-"):
            index, _score, text = line[2:].split("\t", 2)
            hypotheses[int(index)] = text
    return [hypotheses[i] for i in sorted(hypotheses)]


def own_seconds(path: Path, run: int) -> float:
    """The batch-128 time of run `run` of the peer in `path` (WORK/fairseq, onmt or ct2), by its
    own clock: from fairseq-generate's and onmt_translate's logs, ct2_decode.py's JSON."""
    if path.name == "ct2":
        return read_json(path / f"decode{run}.json")["seconds"]
    log = (path / f"decode{run}.log").read_text(encoding="utf-8")
    clock = FAIRSEQ_TIME if path.name == "fairseq" else ONMT_TIME
    return float(clock.search(log).group(1))


def peer(path: Path, model: spm.SentencePieceProcessor) -> Measured:
    """The runs of the peer in `path` (WORK/fairseq, onmt or ct2): decode<run>.log (fairseq: with
    the output), decode<run>.de (the others' output), single<run>.json (the times of batch 1)
    and the /usr/bin/time -v report of each (<decode|single>-time<run>.log)."""
    if path.name == "fairseq":
        output = fairseq_hypotheses((path / "decode1.log").read_text(encoding="utf-8"))
    else:
        output = (path / "decode1.de").read_text(encoding="utf-8").splitlines()
    return Measured(
        seconds=[own_seconds(path, run) for run in RUNS],
        peak_rss_mib=[peak_rss_mib(path / f"decode-time{run}.log") for run in RUNS],
        single_seconds=[read_json(path / f"single{run}.json")["batch_seconds"] for run in RUNS],
        single_peak_rss_mib=[peak_rss_mib(path / f"single-time{run}.log") for run in RUNS],
        texts=detokenize(output, model),
    )


def ours(work: Path, precision: str) -> Measured:
    """Our runs in decode.precision `precision`: benchmarks/bench.py's
    ours-<precision>-{decode,single}<run>.json, and the output of seq2seq evaluate,
    ours/test.<precision>.de."""
    decode = [read_json(work / f"ours-{precision}-decode{run}.json") for run in RUNS]
    single = [read_json(work / f"ours-{precision}-single{run}.json") for run in RUNS]
    decode = [record["models"][0]["decoding"] for record in decode]
    single = [record["models"][0]["decoding"] for record in single]
    return Measured(
        seconds=[decoding["beams"][0]["seconds"] for decoding in decode],
        peak_rss_mib=[decoding["memory"]["peak_mib"] for decoding in decode],
        single_seconds=[decoding["beams"][0]["batch_seconds"] for decoding in single],
        single_peak_rss_mib=[decoding["memory"]["peak_mib"] for decoding in single],
        texts=(work / "ours" / f"test.{precision}.de").read_text("utf-8").splitlines(),
    )


def toolkit(
    name: str,
    version: str,
    measured: Measured,
    references: list[str],
    model: spm.SentencePieceProcessor,
) -> dict[str, Any]:
    """One toolkit's figures: BLEU of its output, and the speed and peak memory of each run."""
    scores = corpus_scores(measured.texts, references)
    pieces = sum(len(line) for line in model.encode(measured.texts))
    single_ms = [[seconds * 1000 for seconds in run] for run in measured.single_seconds]
    return {
        "name": name,
        "version": version,
        "bleu": round(scores.bleu, 2),
        "bleu_lc": round(scores.bleu_lc, 2),
        "chrf": round(scores.chrf, 2),
        "signatures": scores.signatures,
        "output_words": sum(len(text.split()) for text in measured.texts),
        "output_pieces": pieces,
        "seconds": [round(seconds, 2) for seconds in measured.seconds],
        "sentences_per_second": [round(len(measured.texts) / s, 1) for s in measured.seconds],
        "pieces_per_second": [round(pieces / seconds, 1) for seconds in measured.seconds],
        "ms_per_output_piece": [
            round(seconds * 1000 / pieces, 4) if pieces else None for seconds in measured.seconds
        ],
        "peak_rss_mib": [round(peak, 1) for peak in measured.peak_rss_mib],
        "batch1_sentences": len(single_ms[0]),
        "batch1_mean_ms": [round(statistics.mean(run), 2) for run in single_ms],
        "batch1_median_ms": [round(statistics.median(run), 2) for run in single_ms],
        "batch1_peak_rss_mib": [round(peak, 1) for peak in measured.single_peak_rss_mib],
    }


def ratios(toolkits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ours against CTranslate2 and against the fastest PyTorch peer on each measure: ours' mean
    over the runs divided by theirs (above 1: ours is slower). A measure that a toolkit lacks (the
    time per piece of an output without pieces, from a model that stops at once) gives no ratio,
    and such a peer is not the fastest."""
    by_name = {toolkit["name"]: toolkit for toolkit in toolkits}

    def mean(name: str | None, measure: str) -> float | None:
        values = by_name[name][measure] if name else [None]
        return None if None in values else statistics.mean(values)

    def ratio(ours: float | None, theirs: float | None) -> float | None:
        return None if ours is None or theirs is None else round(ours / theirs, 2)

    rows = []
    for name, _ in OURS:
        for measure in RATIO_MEASURES:
            peers = [peer for peer in PYTORCH_PEERS if mean(peer, measure) is not None]
            fastest = min(peers, key=lambda peer: mean(peer, measure), default=None)
            rows.append(
                {
                    "ours": name,
                    "measure": measure,
                    "vs_ctranslate2": ratio(mean(name, measure), mean(CTRANSLATE2, measure)),
                    "fastest_pytorch_peer": fastest,
                    "vs_fastest_pytorch_peer": ratio(mean(name, measure), mean(fastest, measure)),
                }
            )
    return rows


def make_record(work: Path, steps: int, prepared: Path) -> dict[str, Any]:
    """The record of decode.sh's runs in `work`, scored against the test split of `prepared`."""
    model = spm.SentencePieceProcessor(model_file=str(prepared / "spm.model"))
    _, references = PreparedData.load(prepared).lines("test")
    fairseq, onmt, ctranslate2 = peer_versions(work, "fairseq-fixed", "OpenNMT-py", "ctranslate2")
    header = record_header("peers-decode")
    revision = header["git_revision"][:10]
    measured = [
        ("fairseq", fairseq, peer(work / "fairseq", model)),
        ("OpenNMT-py", onmt, peer(work / "onmt", model)),
        (CTRANSLATE2, ctranslate2, peer(work / "ct2", model)),
        *((name, revision, ours(work, precision)) for name, precision in OURS),
    ]
    counts = {name: [len(run) for run in runs.single_seconds] for name, _, runs in measured}
    if len({count for runs in counts.values() for count in runs}) != 1:
        raise SystemExit(f"{work}: not every batch-1 run decoded as many sentences: {counts}")
    toolkits = [toolkit(name, version, runs, references, model) for name, version, runs in measured]
    return {
        **header,
        "train_steps": steps,
        "reproduce": f"bash benchmarks/peers/decode.sh ../peers {steps}",
        "setup": (
            "Transformer 3+3 layers, d_model 256, FFN 1024, 4 heads, shared embeddings, trained "
            f"{steps} updates in each toolkit with the same schedule (warmup to 1e-3 over "
            "400 updates, inverse square root), batches of about 2,500 target tokens, Multi30k "
            "en-de in our joint 8k sentencepiece pieces; CTranslate2 decodes fairseq's model, "
            "converted by ct2-fairseq-converter with int8 weights; decoding the 1000 test "
            "sentences in batches of 128 and the first 200 one at a time, beam 5, fairseq and "
            "OpenNMT-py in fp32, CTranslate2 in int8 (compute_type int8), ours in its default "
            "decode.precision (auto: bf16 autocast on a CPU with AVX512_BF16 or AMX) and in int8 "
            "(int8 linear layers, the rest fp32)"
        ),
        "method": (
            "Two decoding runs per toolkit and batch size; batch-128 times from each toolkit's "
            "own clock around its decoding loop (fairseq-generate 'Translated ... in Xs', "
            "onmt_translate -report_time 'Total translation time', benchmarks/bench.py and "
            "benchmarks/peers/ct2_decode.py), model loading excluded; batch-1 times per sentence "
            "(ours and CTranslate2: their clocks around each batch; fairseq and OpenNMT-py: "
            "benchmarks/peers/timed_search.py around each call of the task's inference_step and "
            "the translator's translate_batch). Output pieces: each output's text encoded by "
            "our sentencepiece model. Peak RSS: the maximum resident set size of each decoding "
            "process (the peers' from /usr/bin/time -v, ours from benchmarks/bench.py, whose "
            "decoding runs in a process of its own). BLEU: every output detokenized by our "
            "sentencepiece model and scored by sacreBLEU against the same references. Ratios: "
            "ours' mean over the runs divided by CTranslate2's and by the fastest PyTorch "
            "peer's on that measure (above 1: ours is slower)."
        ),
        "toolkits": toolkits,
        "ratios": ratios(toolkits),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path, help="the WORK_DIR of decode.sh")
    parser.add_argument("steps", type=int, help="the updates each model was trained for")
    parser.add_argument("--out", type=Path, help="the JSON file")
    args = parser.parse_args()
    record = make_record(args.work, args.steps, PREPARED)
    out = args.out or default_out("peers-decode")
    write_record(record, out)
    print(out)


if __name__ == "__main__":
    main()
