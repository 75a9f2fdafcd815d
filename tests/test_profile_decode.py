"""The decoding profile (benchmarks/profile_decode.py): operators grouped into categories, the
bytes of weights and tensors, and the record of a tiny real run (timings are never asserted,
only that they are positive and add up)."""

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import measure
import profile_decode
import pytest
import torch
from profile_decode import (
    CATEGORIES,
    OTHER,
    OVERHEAD,
    ProfileSettings,
    group_operators,
    tensor_bytes,
    time_breakdown,
    top_operators,
    weight_bytes,
)
from results_table import profile_section

from seq2seq.decoding.quantize import quantized_copy

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = [sys.executable, str(ROOT / "benchmarks" / "profile_decode.py")]
SENTENCES = [
    "A dog runs in the snow.",
    "Two men are playing football in a park.",
    "A woman in a red dress is reading a book.",
    "Children play on the beach.",
]


def operator(name: str, micros: int, calls: int = 1) -> SimpleNamespace:
    """What torch.profiler's key_averages() gives per operator, as far as the grouping reads."""
    return SimpleNamespace(key=name, self_cpu_time_total=micros, count=calls)


OPERATORS = [
    operator("aten::addmm", 3000, 10),
    operator("aten::mm", 1000),
    operator("quantized::linear_dynamic", 500),
    operator("aten::linear", 40),
    operator("aten::_softmax", 400),
    operator("aten::masked_fill", 100),
    operator("aten::bitwise_not", 60),
    operator("aten::_log_softmax", 700),
    operator("aten::topk", 200),
    operator("aten::amax", 50),
    operator("aten::index_select", 300),
    operator("aten::cat", 150),
    operator("aten::gather", 30),
    operator("aten::native_layer_norm", 250),
    operator("aten::layer_norm", 10),
    operator("aten::copy_", 120),
    operator("aten::_to_copy", 30),
    operator("aten::view", 70),
    operator("aten::empty", 50),
    operator("aten::add", 80),
    operator("aten::sin", 20),
    operator("aten::an_operator_never_seen", 40),
]
GROUPED = {
    "matrix products": 4540,
    "attention softmax and masking": 560,
    "vocabulary log-softmax": 700,
    "top-k": 250,
    "cache reordering and gathers": 480,
    "layer norm": 260,
    "copies and casts": 150,
    "views and allocations": 120,
    OTHER: 140,
}


def test_operators_are_grouped_by_name() -> None:
    assert list(CATEGORIES) == list(GROUPED)[:-1]
    assert group_operators(OPERATORS) == GROUPED
    assert sum(GROUPED.values()) == sum(op.self_cpu_time_total for op in OPERATORS) == 7200
    assert group_operators([]) == dict.fromkeys(GROUPED, 0.0)


def test_the_breakdown_adds_up_to_the_profiled_run() -> None:
    # 15,625 microseconds profiled (exact in binary), 7,200 of them in operators.
    breakdown = time_breakdown(GROUPED, 0.015625, timed_seconds=0.5, steps=10)
    assert [entry["category"] for entry in breakdown] == [*GROUPED, OVERHEAD]
    overhead = breakdown[-1]
    assert overhead["profiled_ms"] == 8.425
    assert sum(entry["profiled_ms"] for entry in breakdown) == pytest.approx(15.625, abs=1e-12)
    assert sum(entry["share_percent"] for entry in breakdown) == pytest.approx(100, abs=1e-9)
    matrix = breakdown[0]
    assert matrix["share_percent"] == pytest.approx(100 * 4540 / 15625)
    # The share of the unprofiled run's 0.5 s, over 10 steps: 14.528 ms a step.
    assert matrix["ms_per_step"] == pytest.approx(14.528)
    assert sum(entry["ms_per_step"] for entry in breakdown) == pytest.approx(50.0)

    # Operators that outlast the run (two clocks) leave no overhead; the shares still add up.
    longer = time_breakdown(GROUPED, 0.005, timed_seconds=0.5, steps=10)
    assert longer[-1]["profiled_ms"] == 0
    assert sum(entry["share_percent"] for entry in longer) == pytest.approx(100, abs=1e-9)
    assert all(entry["ms_per_step"] is None for entry in time_breakdown(GROUPED, 0.1, 0.5, 0))


def test_top_operators_name_their_category() -> None:
    top = top_operators(OPERATORS, 3)
    assert [(op["name"], op["calls"], op["self_ms"]) for op in top] == [
        ("aten::addmm", 10, 3.0),
        ("aten::mm", 1, 1.0),
        ("aten::_log_softmax", 1, 0.7),
    ]
    assert [op["category"] for op in top] == [
        "matrix products",
        "matrix products",
        "vocabulary log-softmax",
    ]
    every = {op["name"]: op["category"] for op in top_operators(OPERATORS, 100)}
    assert len(every) == len(OPERATORS) and every["aten::an_operator_never_seen"] == OTHER


def test_weights_and_tensors_are_counted_in_bytes() -> None:
    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False))
    model[1].weight = model[0].weight  # tied: counted once
    assert weight_bytes(model) == 10 * 4 * 4
    quantized = quantized_copy(torch.nn.Sequential(torch.nn.Linear(8, 16)))
    # int8 weights, the fp32 bias, a float64 scale and an int64 zero point per output row, and
    # the module's own output scale (fp32) and zero point (int64), which dynamic layers keep
    assert weight_bytes(quantized) == 16 * 8 + 16 * 4 + 16 * 8 + 16 * 8 + 4 + 8
    nested = {"a": torch.zeros(3, 2), "b": [torch.zeros(5, dtype=torch.long)], "n": 7}
    assert tensor_bytes(nested) == 3 * 2 * 4 + 5 * 8


@pytest.mark.slow  # decodes with the shipped model, twice under a profiler
def test_a_tiny_real_run_writes_its_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Measure in the test's process: starting one takes seconds.
    monkeypatch.setattr(measure, "in_fresh_process", lambda fn, *args: fn(*args))
    settings = ProfileSettings(precisions=["fp32"], batch_sizes=[2], sentences=4, beam=2)
    settings.threads = 1
    record = profile_decode.run_profile(settings, SENTENCES * 2)
    out = tmp_path / "profile.json"
    measure.write_record(record, out)
    record = json.loads(out.read_text())

    assert record["kind"] == "profile-decode"
    assert record["environment"]["device"] == "cpu" and record["environment"]["threads"] == 1
    assert isinstance(record["cpu"]["bf16_instructions"], bool)
    assert record["settings"]["sentences"] == 4 and record["settings"]["beam"] == 2
    assert record["model"]["name"] == "transformer-tiny.multi30k.en-de"
    assert record["model"]["parameters"] > 0 and record["model"]["fp32_weights_mib"] > 1
    assert record["torch_import_rss_mib"] > 0

    (config,) = record["configurations"]
    assert (config["precision"], config["batch_size"], config["sentences"]) == ("fp32", 2, 4)
    decoding = config["decoding"]
    assert decoding["seconds"] > 0 and decoding["sentences_per_second"] > 0
    assert decoding["output_pieces"] > 0 and decoding["pieces_per_second"] > 0
    assert decoding["beam_steps"] > 0  # two batches of two sentences, a step per position
    assert 2 <= decoding["rows_per_step"] <= 4  # two sentences' two beams, fewer as they end
    assert decoding["ms_per_step"] == pytest.approx(
        1000 * decoding["seconds"] / decoding["beam_steps"]
    )

    profile = config["profile"]
    assert 0 < profile["operator_seconds"] <= profile["seconds"]
    assert profile["profiler_seconds"] > 0  # a profiler per batch, started, stopped and read
    categories = profile["categories"]
    assert [c["category"] for c in categories] == [*CATEGORIES, OTHER, OVERHEAD]
    assert sum(c["share_percent"] for c in categories) == pytest.approx(100, abs=0.01)
    assert all(c["share_percent"] >= 0 for c in categories)
    assert categories[0]["share_percent"] > 0 and categories[0]["ms_per_step"] > 0
    assert sum(c["ms_per_step"] for c in categories) == pytest.approx(decoding["ms_per_step"])
    top = profile["top_operators"]
    assert 0 < len(top) <= 25 and top[0]["self_ms"] >= top[-1]["self_ms"] > 0

    memory = config["memory"]
    assert 0 < memory["after_imports_mib"] <= memory["decoding_peak_mib"]
    assert memory["weights_mib"] == record["model"]["fp32_weights_mib"]
    largest = config["largest_step"]
    assert 2 <= largest["rows"] <= 4
    assert largest["state_mib"] > 0 and largest["cache_mib"] > 0
    assert largest["log_probs_mib"] == largest["rows"] * 8000 * 4 / 2**20  # fp32 (rows, V)

    table = profile_section(record, out)
    assert "| fp32, batch 2 | 4 |" in table and "| Python and dispatch overhead |" in table


@pytest.mark.slow  # starts a Python that imports torch
def test_a_bad_command_line_is_one_error_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing.en"
    result = subprocess.run([*SCRIPT, "--sources", str(missing)], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr == f"error: --sources {missing}: no such file\n"
    result = subprocess.run([*SCRIPT, "--precisions", "int4"], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.startswith("error: argument --precisions: invalid choice: 'int4'")
