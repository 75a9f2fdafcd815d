"""The side-by-side decoding report (benchmarks/peers/decode_report.py): its figures from a
fabricated WORK_DIR of decode.sh, whose every output is the reference, so BLEU is 100 and the
piece count is known."""

import json
import sys
from pathlib import Path

import pytest
import sentencepiece as spm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "peers"))
import decode_report

from seq2seq.data.prepared_corpus import PreparedData

KIB_PER_GIB = 1024 * 1024


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def time_report(peak_kib: int) -> str:
    """The lines of /usr/bin/time -v around the one decode_report.py reads."""
    return f"\tUser time (seconds): 3.1\n\tMaximum resident set size (kbytes): {peak_kib}\n"


def bench_record(seconds: float, batch_seconds: list[float], peak_mib: float) -> str:
    """benchmarks/bench.py's record, with only what decode_report.py reads."""
    beam = {"beam_size": 5, "seconds": seconds, "batch_seconds": batch_seconds}
    decoding = {"beams": [beam], "memory": {"peak_mib": peak_mib}}
    return json.dumps({"models": [{"decoding": decoding}]})


def fabricate(work: Path, references: list[str], model: spm.SentencePieceProcessor) -> None:
    """A WORK_DIR after decode.sh: per toolkit two batch-128 runs of 10 and 8 s (CTranslate2 2
    and 1.5 s, ours 5 and 3 s) at 1 / 2 GiB peak RSS, and two batch-1 runs of three sentences,
    10, 20, 60 and 10, 30, 50 ms (CTranslate2 and ours: a tenth and a half of that)."""
    pieces = [" ".join(line) for line in model.encode(references, out_type=str)]
    single = [[0.01, 0.02, 0.06], [0.01, 0.03, 0.05]]
    for run, seconds in enumerate((10.0, 8.0), start=1):
        hypotheses = [f"H-{i}\t-0.5\t{line}" for i, line in reversed(list(enumerate(pieces)))]
        translated = f"Translated {len(pieces):,} sentences (9,999 tokens) in {seconds}s (x)"
        write(work / "fairseq" / f"decode{run}.log", "\n".join([*hypotheses, translated]))
        write(work / "onmt" / f"decode{run}.log", f"Total translation time (s): {seconds}\n")
        write(work / "onmt" / f"decode{run}.de", "\n".join(pieces) + "\n")
        write(work / "ct2" / f"decode{run}.de", "\n".join(pieces) + "\n")
        write(work / "ct2" / f"decode{run}.json", json.dumps({"seconds": seconds / 5}))
        for folder in ("fairseq", "onmt", "ct2"):
            share = 0.1 if folder == "ct2" else 1
            times = [time * share for time in single[run - 1]]
            write(work / folder / f"single{run}.json", json.dumps({"batch_seconds": times}))
            write(work / folder / f"decode-time{run}.log", time_report(KIB_PER_GIB))
            write(work / folder / f"single-time{run}.log", time_report(2 * KIB_PER_GIB))
        for precision in ("auto", "int8"):
            times = [time / 2 for time in single[run - 1]]
            record = bench_record(seconds / 2 - 1, [seconds / 2 - 1], 700.0)
            write(work / f"ours-{precision}-decode{run}.json", record)
            write(work / f"ours-{precision}-single{run}.json", bench_record(1.0, times, 650.0))
            write(work / "ours" / f"test.{precision}.de", "\n".join(references) + "\n")


@pytest.fixture
def work(reversal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fabricated WORK_DIR whose outputs are the references of `reversal`."""
    model = spm.SentencePieceProcessor(model_file=str(reversal / "spm.model"))
    _, references = PreparedData.load(reversal).lines("test")
    fabricate(tmp_path, references, model)
    versions = ["0.12.3.1", "3.5.1", "4.8.5"]
    monkeypatch.setattr(decode_report, "peer_versions", lambda work, *packages: versions)
    return tmp_path


def test_decode_report_figures(reversal: Path, work: Path) -> None:
    model = spm.SentencePieceProcessor(model_file=str(reversal / "spm.model"))
    _, references = PreparedData.load(reversal).lines("test")
    record = decode_report.make_record(work, 20, reversal)

    assert record["kind"] == "peers-decode" and record["train_steps"] == 20
    assert record["reproduce"] == "bash benchmarks/peers/decode.sh ../peers 20"
    toolkits = {toolkit["name"]: toolkit for toolkit in record["toolkits"]}
    assert list(toolkits) == [
        "fairseq",
        "OpenNMT-py",
        "CTranslate2",
        "seq2seq (ours)",
        "seq2seq (ours), int8",
    ]
    assert toolkits["CTranslate2"]["version"] == "4.8.5"
    pieces = sum(len(line) for line in model.encode(references))
    sentences = len(references)
    for name, toolkit in toolkits.items():
        assert toolkit["bleu"] == 100.0, name  # every output is the reference, in test order
        assert toolkit["output_pieces"] == pieces, name
        assert toolkit["batch1_sentences"] == 3
    fairseq, ct2, ours = toolkits["fairseq"], toolkits["CTranslate2"], toolkits["seq2seq (ours)"]
    assert fairseq["seconds"] == [10.0, 8.0] and toolkits["OpenNMT-py"]["seconds"] == [10.0, 8.0]
    assert ct2["seconds"] == [2.0, 1.6] and ours["seconds"] == [4.0, 3.0]
    assert fairseq["sentences_per_second"] == [round(sentences / 10, 1), round(sentences / 8, 1)]
    assert ct2["pieces_per_second"] == [round(pieces / 2, 1), round(pieces / 1.6, 1)]
    assert ours["ms_per_output_piece"] == [round(4000 / pieces, 4), round(3000 / pieces, 4)]
    assert fairseq["peak_rss_mib"] == [1024.0, 1024.0] and ours["peak_rss_mib"] == [700.0] * 2
    assert fairseq["batch1_mean_ms"] == [30.0, 30.0] and fairseq["batch1_median_ms"] == [20, 30]
    assert ct2["batch1_mean_ms"] == [3.0, 3.0] and ct2["batch1_median_ms"] == [2.0, 3.0]
    assert ours["batch1_median_ms"] == [10.0, 15.0]
    assert (
        fairseq["batch1_peak_rss_mib"] == [2048.0] * 2 and ours["batch1_peak_rss_mib"] == [650] * 2
    )

    ratios = {(row["ours"], row["measure"]): row for row in record["ratios"]}
    assert len(ratios) == 6
    per_piece = ratios["seq2seq (ours), int8", "ms_per_output_piece"]
    # Ours 3.5 s a run against CTranslate2's 1.8 s and the PyTorch peers' 9 s.
    assert per_piece["vs_ctranslate2"] == round(3.5 / 1.8, 2)
    assert per_piece["vs_fastest_pytorch_peer"] == round(3.5 / 9, 2)
    mean = ratios["seq2seq (ours)", "batch1_mean_ms"]
    assert mean["vs_ctranslate2"] == 5.0 and mean["vs_fastest_pytorch_peer"] == 0.5
    assert ratios["seq2seq (ours)", "batch1_median_ms"]["vs_ctranslate2"] == 5.0


def test_decode_report_refuses_batch1_runs_of_unequal_length(reversal: Path, work: Path) -> None:
    """fairseq-generate, for one, once dropped a sentence at batch size 1."""
    write(work / "fairseq" / "single2.json", json.dumps({"batch_seconds": [0.01, 0.02]}))
    with pytest.raises(SystemExit, match=r"as many sentences: .*'fairseq': \[3, 2\]"):
        decode_report.make_record(work, 20, reversal)


def test_the_fastest_pytorch_peer_is_chosen_per_measure() -> None:
    figures = {"ms_per_output_piece": [1.0], "batch1_mean_ms": [10.0], "batch1_median_ms": [8.0]}
    fairseq = {"name": "fairseq", **figures, "batch1_mean_ms": [5.0]}
    onmt = {"name": "OpenNMT-py", **figures, "ms_per_output_piece": [0.5]}
    ct2 = {"name": "CTranslate2", **figures}
    ours = [{"name": name, **figures} for name, _ in decode_report.OURS]
    rows = decode_report.ratios([fairseq, onmt, ct2, *ours])
    fastest = {row["measure"]: row["fastest_pytorch_peer"] for row in rows}
    assert fastest["ms_per_output_piece"] == "OpenNMT-py"
    assert fastest["batch1_mean_ms"] == "fairseq"
    assert [row["vs_fastest_pytorch_peer"] for row in rows[:2]] == [2.0, 2.0]
    assert all(row["vs_ctranslate2"] == 1.0 for row in rows)


def test_an_output_without_pieces_has_no_time_per_piece(reversal: Path) -> None:
    """An untrained model may end every sentence at once (OpenNMT-py does, after 20 updates)."""
    model = spm.SentencePieceProcessor(model_file=str(reversal / "spm.model"))
    _, references = PreparedData.load(reversal).lines("test")
    empty = decode_report.Measured([2.0], [1.0], [[0.1]], [1.0], [""] * len(references))
    onmt = decode_report.toolkit("OpenNMT-py", "3.5.1", empty, references, model)
    assert onmt["output_pieces"] == 0 and onmt["pieces_per_second"] == [0.0]
    assert onmt["ms_per_output_piece"] == [None]
    figures = {"ms_per_output_piece": [1.0], "batch1_mean_ms": [10.0], "batch1_median_ms": [8.0]}
    fairseq = {"name": "fairseq", **figures, "ms_per_output_piece": [4.0]}
    ct2 = {"name": "CTranslate2", **figures, "ms_per_output_piece": [None]}
    ours = [{"name": name, **figures} for name, _ in decode_report.OURS]
    per_piece = decode_report.ratios([fairseq, onmt, ct2, *ours])[0]
    assert per_piece["measure"] == "ms_per_output_piece"
    assert per_piece["vs_ctranslate2"] is None
    assert per_piece["fastest_pytorch_peer"] == "fairseq"
    assert per_piece["vs_fastest_pytorch_peer"] == 0.25
