"""The results tables (benchmarks/results_table.py) and model results
(seq2seq/decoding/model_result.py):
the models table, the latest benchmark record of each kind, and the sections written between
markers."""

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from results_table import (
    NO_BENCHMARKS,
    NO_MODELS,
    NO_PROFILE,
    NO_SPEEDRUN,
    bench_section,
    gpu_section,
    latest_profile_section,
    profile_configuration_table,
    sections,
    update_sections,
)

from seq2seq.commands import COMMANDS
from seq2seq.decoding.model_result import ModelResult
from seq2seq.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = [sys.executable, str(ROOT / "benchmarks" / "results_table.py")]
RUN = {"capture_output": True, "text": True}


MODEL_RESULT = {
    "name": "Transformer tiny",
    "model": "transformer-tiny",
    "direction": "en-de",
    "corpus": "multi30k",
    "split": "test",
    "parameters": 2349568,
    "bleu": 38.123,
    "bleu_lc": 39.01,
    "chrf": 64.25,
    "signatures": {"bleu": "case:mixed|tok:13a", "bleu_lc": "case:lc|tok:13a", "chrf": "c6"},
    "beam_size": 5,
    "averaged_checkpoints": 5,
    "train_steps": 30000,
    "train_hours": 1.5,
    "device": "1x NVIDIA H100",
    "commands": ["make data", "make train"],
    "git_revision": "0123456789abcdef0123456789abcdef01234567",
}

MODELS_TABLE = """\
| Model | Direction | Parameters | BLEU | BLEU (lc) | chrF | Beam | Checkpoints averaged | Steps | Training | Device |
|---|---|---|---|---|---|---|---|---|---|---|
| Transformer tiny | en-de | 2.35M | 38.1 | 39.0 | 64.2 | 5 | 5 | 30,000 | 1.5 h | 1x NVIDIA H100 |
| GRU | en-de | 2.35M | 30.0 | 39.0 | 64.2 | 5 | 5 | 30,000 | 1.5 h | 1x NVIDIA H100 |

Scored on multi30k test; sacreBLEU bleu `case:mixed|tok:13a`, bleu_lc `case:lc|tok:13a`, chrf `c6`. \
A row naming a shipped model is that model, scored from its files (its `card.json`); \
the others are the best run of their family and direction. \
The commands that made each model, and the revision that scored it, are in its record under \
`results/models/`."""  # noqa: E501


def write_json(path: Path, values: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(values))
    return path


def test_models_table(tmp_path: Path) -> None:
    assert sections(tmp_path) == {
        "results": NO_MODELS,
        "bench": NO_BENCHMARKS,
        "profile": NO_PROFILE,
        "speedrun": NO_SPEEDRUN,
    }
    write_json(
        tmp_path / "models" / "a.json",
        {**MODEL_RESULT, "name": "GRU", "model": "gru", "bleu": 30.0},
    )
    write_json(tmp_path / "models" / "b.json", MODEL_RESULT)
    worse = {**MODEL_RESULT, "name": "Transformer small", "model": "transformer-small", "bleu": 37}
    write_json(tmp_path / "models" / "c.json", worse)  # the same family and direction: left out
    assert sections(tmp_path)["results"] == MODELS_TABLE


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"bleu": None}, "bleu should be a float"),
        ({"train_steps": 1.5}, "train_steps should be a int"),
        ({"commands": "make train"}, "commands should be a list"),
        ({"extra": 1}, "missing or unknown keys: extra"),
    ],
)
def test_bad_model_result(tmp_path: Path, change: dict, message: str) -> None:
    path = write_json(tmp_path / "m.json", {**MODEL_RESULT, **change})
    with pytest.raises(UserError, match=message):
        ModelResult.load(path)


def test_model_result_missing_key(tmp_path: Path) -> None:
    values = {key: value for key, value in MODEL_RESULT.items() if key != "chrf"}
    with pytest.raises(UserError, match="missing or unknown keys: chrf"):
        ModelResult.load(write_json(tmp_path / "m.json", values))


README = """\
# Title
<!-- results:start -->
old table
<!-- results:end -->
between
<!-- bench:start --><!-- bench:end -->
end
"""


def test_update_replaces_only_between_markers() -> None:
    updated = update_sections(README, {"results": "NEW", "bench": "B1\nB2"})
    assert updated == (
        "# Title\n<!-- results:start -->\nNEW\n<!-- results:end -->\nbetween\n"
        "<!-- bench:start -->\nB1\nB2\n<!-- bench:end -->\nend\n"
    )
    assert update_sections(updated, {"results": "NEW", "bench": "B1\nB2"}) == updated
    with pytest.raises(UserError, match=r"^no section markers: expected one of <!-- other:start"):
        update_sections(README, {"other": "x"})
    with pytest.raises(UserError, match="one <!-- bench:start --> followed by"):
        update_sections(README.replace("<!-- bench:end -->", ""), {"bench": "x"})


def test_update_writes_only_the_sections_a_file_has_markers_for() -> None:
    only_bench = "intro\n<!-- bench:start -->\nold\n<!-- bench:end -->\n"
    updated = update_sections(only_bench, {"results": "MODELS", "bench": "B"})
    assert updated == "intro\n<!-- bench:start -->\nB\n<!-- bench:end -->\n"


@pytest.mark.slow  # runs the script in another process
def test_results_table_script_updates_the_readme_and_the_benchmarks_page(tmp_path: Path) -> None:
    write_json(tmp_path / "results" / "models" / "a.json", MODEL_RESULT)
    (tmp_path / "README.md").write_text("# Title\n<!-- results:start -->\n<!-- results:end -->\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "benchmarks.md").write_text("<!-- bench:start -->\n<!-- bench:end -->\n")
    result = subprocess.run([*SCRIPT, "--update"], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["updated README.md", "updated docs/benchmarks.md"]
    readme = (tmp_path / "README.md").read_text()
    assert readme.startswith("# Title\n<!-- results:start -->\n| Model | Direction |")
    assert readme.endswith("under `results/models/`.\n<!-- results:end -->\n")
    bench_page = (tmp_path / "docs" / "benchmarks.md").read_text()
    assert bench_page == f"<!-- bench:start -->\n{NO_BENCHMARKS}\n<!-- bench:end -->\n"

    result = subprocess.run([*SCRIPT, "--update", str(tmp_path / "missing.md")], **RUN)
    assert result.returncode == 2 and result.stderr.startswith("error: --update")
    no_markers = tmp_path / "notes.md"
    no_markers.write_text("no markers\n")
    result = subprocess.run([*SCRIPT, "--update", str(no_markers)], **RUN)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {no_markers}: no section markers")
    assert no_markers.read_text() == "no markers\n"


def peers_record(toolkit_name: str = "fairseq") -> dict:
    toolkit = {"name": toolkit_name, "version": "0.12.3", "tgt_tokens_per_step": 2418.4}
    toolkit |= {"tgt_tokens_per_second": [1306.4, 1228.5], "peak_rss_mib": 1553.9}
    record = {"kind": "peers", "device": "CPU", "threads": 2, "torch": "2.13.0", "date": "today"}
    record |= {"git_revision": "0123456789abcdef", "setup": "3+3 layers", "method": "How."}
    record |= {"reproduce": "bash benchmarks/peers/measure.sh", "toolkits": [toolkit]}
    return record


def test_bench_section_shows_the_latest_record_of_each_kind(tmp_path: Path) -> None:
    newer = write_json(tmp_path / "peers-cpu-20261123-010000.json", peers_record("newer"))
    older = write_json(tmp_path / "peers-cpu-20261121-230000.json", peers_record("older"))
    decode = {**peers_record("decoder"), "kind": "peers-decode"}
    decode["toolkits"] = [
        {"name": "decoder", "version": "1", "sentences_per_second": [61.0], "bleu": 30.0}
        | {"bleu_lc": 30.7, "chrf": 58.9}
    ]
    first_decode = write_json(tmp_path / "peers-decode-cpu-20261120-000000.json", decode)
    serve = write_json(tmp_path / "serve-cpu-20261124-000000.json", {"kind": "serve_load"})
    section = bench_section([first_decode, newer, older, serve])
    assert str(serve) not in section  # docs/serve.md shows the server's figures
    assert str(newer) in section and str(older) not in section
    assert "| newer |" in section and "| older |" not in section
    assert section.index(str(newer)) < section.index(str(first_decode))  # peers, then decoding


def test_peers_table(tmp_path: Path) -> None:
    path = write_json(tmp_path / "peers.json", peers_record())
    assert bench_section([path]).splitlines() == [
        "**Side by side** on CPU, 2 threads, torch 2.13.0, revision `0123456789`, today: "
        f"3+3 layers; `bash benchmarks/peers/measure.sh` → `{path}`",
        "",
        "| Toolkit | Version | Target tokens per step | Train tgt tok/s (each run) "
        "| Peak RSS MiB |",
        "|---|---|---|---|---|",
        "| fairseq | 0.12.3 | 2,418 | 1,306 / 1,228 | 1,554 |",
        "",
        "How.",
    ]


def test_tables_name_moved_tools_where_they_are_now(tmp_path: Path) -> None:
    """Older records name scripts/benchmark.py and scripts/peers/: the tables cite the tools
    that exist (tests/test_docs.py checks every command of the generated sections)."""
    record = peers_record()
    record |= {
        "reproduce": "bash scripts/peers/measure.sh",
        "method": "scripts/benchmark.py's clock",
    }
    lines = bench_section([write_json(tmp_path / "peers.json", record)]).splitlines()
    assert "`bash benchmarks/peers/measure.sh`" in lines[0]
    assert lines[-1] == "benchmarks/bench.py's clock"


def test_peers_decode_table(tmp_path: Path) -> None:
    toolkit = {"name": "fairseq", "version": "0.12.3", "sentences_per_second": [61.04, 59.6]}
    toolkit |= {"bleu": 30.04, "bleu_lc": 30.66, "chrf": 58.91}
    record = {"kind": "peers-decode", "device": "CPU", "threads": 2, "torch": "2.13.0"}
    record |= {"date": "today", "git_revision": "0123456789abcdef", "setup": "beam 5"}
    record |= {"method": "How.", "reproduce": "bash decode.sh", "toolkits": [toolkit]}
    path = write_json(tmp_path / "decode.json", record)
    assert bench_section([path]).splitlines() == [
        "**Side by side** on CPU, 2 threads, torch 2.13.0, revision `0123456789`, today: "
        f"beam 5; `bash decode.sh` → `{path}`",
        "",
        "| Toolkit | Version | Beam-5 sent/s (each run) | BLEU | BLEU lc | chrF |",
        "|---|---|---|---|---|---|",
        "| fairseq | 0.12.3 | 61.0 / 59.6 | 30.0 | 30.7 | 58.9 |",
        "",
        "How.",
    ]
    toolkit["peak_rss_mib"] = [1017.4, 1020.6]
    path = write_json(tmp_path / "decode.json", record)
    assert bench_section([path]).splitlines()[2:5] == [
        "| Toolkit | Version | Beam-5 sent/s (each run) | BLEU | BLEU lc | chrF | "
        "Peak RSS MiB (each run) |",
        "|---|---|---|---|---|---|---|",
        "| fairseq | 0.12.3 | 61.0 / 59.6 | 30.0 | 30.7 | 58.9 | 1,017 / 1,021 |",
    ]


def test_peers_decode_table_with_ctranslate2(tmp_path: Path) -> None:
    toolkit = {"name": "CTranslate2", "version": "4.8.5", "sentences_per_second": [400.0, 410.0]}
    toolkit |= {"pieces_per_second": [5012.3, 5120.9], "batch1_mean_ms": [9.04, 9.5]}
    toolkit |= {"batch1_median_ms": [8.0, 8.26], "bleu": 30.04, "bleu_lc": 30.66, "chrf": 58.91}
    toolkit |= {"peak_rss_mib": [300.2, 310.0], "batch1_peak_rss_mib": [250.0, 251.0]}
    record = {"kind": "peers-decode", "device": "CPU", "threads": 2, "torch": "2.13.0"}
    record |= {"date": "today", "git_revision": "0123456789abcdef", "setup": "beam 5"}
    record |= {"method": "How.", "reproduce": "bash decode.sh", "toolkits": [toolkit]}
    ratio = {"ours": "seq2seq (ours), int8", "measure": "batch1_mean_ms", "vs_ctranslate2": 2.1}
    ratio |= {"fastest_pytorch_peer": "fairseq", "vs_fastest_pytorch_peer": 0.456}
    missing = {**ratio, "measure": "ms_per_output_piece", "vs_ctranslate2": None}
    missing |= {"fastest_pytorch_peer": None, "vs_fastest_pytorch_peer": None}
    record["ratios"] = [ratio, missing]
    path = write_json(tmp_path / "decode.json", record)
    assert bench_section([path]).splitlines()[2:] == [
        "| Toolkit | Version | Beam-5 sent/s (each run) | Output pieces/s | Batch-1 ms, mean "
        "| Batch-1 ms, median | BLEU | BLEU lc | chrF | Peak RSS MiB (each run) "
        "| Batch-1 peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        "| CTranslate2 | 4.8.5 | 400.0 / 410.0 | 5,012 / 5,121 | 9.0 / 9.5 | 8.0 / 8.3 | 30.0 "
        "| 30.7 | 58.9 | 300 / 310 | 250 / 251 |",
        "",
        "| Ours | Measure | Ours / CTranslate2 | Ours / fastest PyTorch peer |",
        "|---|---|---|---|",
        "| seq2seq (ours), int8 | batch-1 mean latency | 2.10 | 0.46 (fairseq) |",
        "| seq2seq (ours), int8 | time per output piece, batch 128 | – | – |",
        "",
        "How.",
    ]


def test_gpu_table() -> None:
    record = {
        "kind": "gpu",
        "environment": {
            "device": "cuda",
            "device_name": "NVIDIA H100 80GB HBM3",
            "torch": "2.11.0",
            "cuda": "13.0",
            "command": "bash benchmarks/gpu.sh",
        },
        "training_run": {
            "steps": 8000,
            "seconds": 615.8,
            "time_to_valid_bleu": {
                "35": {"seconds": 291.9, "step": 3000, "bleu": 36.4},
                "40": None,
            },
            "valid_bleu": [[500, 9.23], [5500, 39.77], [8000, 39.1]],
            "tgt_tokens_per_second": 79195.6,
            "peak_device_memory_mib": 2319.0,
        },
        "decoding": {
            "beam5": {"sentences_per_second": 51.11, "bleu": 39.006},
            "beam1": {"sentences_per_second": 46.39, "bleu": 37.83},
        },
    }
    table = gpu_section(record, Path("results/bench/gpu-x.json"))
    assert table.splitlines()[0] == (
        "**NVIDIA H100 80GB HBM3** (cuda, torch 2.11.0, CUDA 13.0); "
        "`bash benchmarks/gpu.sh` → `results/bench/gpu-x.json`"
    )
    assert "| Time to valid BLEU 35 (beam 5) | 292 s (step 3,000) |" in table
    assert "| Time to valid BLEU 40 (beam 5) | not reached |" in table
    assert "| Training run | 8,000 steps in 616 s, best valid BLEU 39.77 at step 5,500 |" in table
    assert "| Peak device memory | 2,319 MiB |" in table
    assert "| Beam 5 decoding, bf16, best checkpoint | 51.1 sentences/s, BLEU 39.01 |" in table
    assert "| Greedy decoding, bf16, best checkpoint | 46.4 sentences/s, BLEU 37.83 |" in table
    # an older record: no model FLOPs, warm decoding nor profile, so none of their rows
    for row in ("Model FLOPs", "Warm decoding", "GPU busy"):
        assert row not in table


def test_gpu_table_shows_utilisation_warm_decoding_and_the_profile() -> None:
    record = {
        "kind": "gpu",
        "environment": {
            "device": "cuda",
            "device_name": "NVIDIA H200",
            "torch": "2.11.0",
            "cuda": "13.0",
            "command": "bash benchmarks/gpu.sh",
        },
        "training_run": {
            "steps": 3000,
            "seconds": 300.2,
            "time_to_valid_bleu": {"35": None, "40": None},
            "valid_bleu": [[100, 9.5]],
            "tgt_tokens_per_second": 900000.0,
            "model_flops": {"utilisation": 0.01304},
            "peak_device_memory_mib": None,
        },
        "decoding": {
            "beam5": {"sentences_per_second": 400.0, "bleu": 39.0},
            "beam1": {"sentences_per_second": 900.0, "bleu": 38.0},
        },
        "warm_decoding": {
            "beam5": {"sentences_per_second": 612.34, "mean_syncs_per_step": 0.25},
            "beam1": {"sentences_per_second": 1500.0, "mean_syncs_per_step": 0.0},
        },
        "profile": {
            "training": {"wall_seconds_per_step": 0.03712, "gpu_busy_share": 0.0413},
            "decoding": {"wall_seconds_per_step": 0.0051, "gpu_busy_share": 0.25},
        },
    }
    rows = gpu_section(record, Path("gpu-y.json")).splitlines()[6:]
    assert rows == [
        "| Training run | 3,000 steps in 300 s, best valid BLEU 9.50 at step 100 |",
        "| Training target tokens/s | 900,000 |",
        "| Model FLOPs utilisation | 1.30% |",
        "| Peak device memory | not sampled |",
        "| Beam 5 decoding, bf16, best checkpoint | 400.0 sentences/s, BLEU 39.00 |",
        "| Greedy decoding, bf16, best checkpoint | 900.0 sentences/s, BLEU 38.00 |",
        "| Warm decoding, beam 5 | 612.3 sentences/s, 0.25 host syncs per step |",
        "| Warm decoding, greedy | 1,500.0 sentences/s, 0.00 host syncs per step |",
        "| GPU busy share of a training step (profiled) | 4.1% of 37.12 ms |",
        "| GPU busy share of a decoding step (profiled) | 25.0% of 5.10 ms |",
    ]
    # a device without a known peak, and a profile taken on a CPU: no figure, a dash
    record["training_run"]["model_flops"] = {"utilisation": None}
    record["profile"]["training"]["gpu_busy_share"] = None
    table = gpu_section(record, Path("gpu-y.json"))
    assert "| Model FLOPs utilisation | – |" in table
    assert "| GPU busy share of a training step (profiled) | – of 37.12 ms |" in table


def test_the_shipped_model_stands_for_its_family_and_direction(tmp_path: Path) -> None:
    """A shipped model's card is its family and direction's row, even beside a better run, and
    its row names its folder."""
    write_json(tmp_path / "results" / "models" / "better.json", {**MODEL_RESULT, "bleu": 41.9})
    card = {**MODEL_RESULT, "name": "Shipped tiny", "bleu": 41.4}
    write_json(tmp_path / "models" / "tiny.en-de" / "card.json", card)
    table = sections(tmp_path / "results", models_dir=tmp_path / "models")["results"]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "en-de" in line]
    assert len(rows) == 1
    assert rows[0].startswith("| Shipped tiny: `tiny.en-de` | en-de | 2.35M | 41.4 |")
    assert "41.9" not in table
    without = sections(tmp_path / "results")["results"]
    assert "| Transformer tiny | en-de | 2.35M | 41.9 |" in without


def profile_configuration(precision: str, batch_size: int, scale: float) -> dict:
    """One configuration of a fabricated profile-decode record (benchmarks/profile_decode.py)."""
    categories = [
        ("matrix products", 45.4, 2.27 * scale),
        ("top-k", 2.5, 0.125 * scale),
        ("Python and dispatch overhead", 52.1, 2.605 * scale),
    ]
    return {
        "precision": precision,
        "batch_size": batch_size,
        "sentences": 1000,
        "decoding": {
            "seconds": 4.0,
            "sentences_per_second": 250.0,
            "output_pieces": 14000,
            "pieces_per_second": 3500.0,
            "ms_per_sentence": 4.0,
            "beam_steps": 800,
            "decoder_rows": 320000,
            "rows_per_step": 400.0,
            "ms_per_step": 5.0,
        },
        "profile": {
            "seconds": 6.0,
            "operator_seconds": 2.874,
            "categories": [
                {"category": name, "profiled_ms": 0.0, "share_percent": share, "ms_per_step": ms}
                for name, share, ms in categories
            ],
            "top_operators": [],
        },
        "memory": {
            "after_imports_mib": 264.4,
            "model_loaded_mib": 279.6,
            "translator_mib": 313.2,
            "weights_mib": 6.54,
            "peak_before_decoding_mib": 313.2,
            "decoding_peak_mib": 420.9,
            "after_decoding_mib": 400.0,
        },
        "largest_step": {"rows": 640, "state_mib": 1.25, "cache_mib": 10.0, "log_probs_mib": 19.5},
    }


def profile_record() -> dict:
    environment = {"device": "cpu", "device_name": "AMD EPYC", "cpu_count": 2, "threads": 2}
    environment |= {"torch": "2.13.0", "git_revision": "0123456789abcdef", "git_dirty": False}
    environment |= {"command": "python benchmarks/profile_decode.py"}
    return {
        "kind": "profile-decode",
        "environment": environment,
        "cpu": {"bf16_instructions": False, "fast_bf16_kernels": False, "capability": "AVX2"},
        "settings": {"model": "transformer-tiny.multi30k.en-de", "beam": 5, "threads": 2},
        "model": {"name": "transformer-tiny.multi30k.en-de", "fp32_weights_mib": 8.96},
        "torch_import_rss_mib": 225.3,
        "configurations": [
            profile_configuration("int8", 128, 1.0),
            profile_configuration("fp32", 1, 2.0),
        ],
    }


def test_profile_tables(tmp_path: Path) -> None:
    path = write_json(tmp_path / "profile-decode-amd-epyc-20261125-120000.json", profile_record())
    lines = latest_profile_section([path]).splitlines()
    assert lines[0] == (
        "**AMD EPYC** (2 cores, without bf16 instructions, kernels AVX2; 2 threads), torch "
        "2.13.0, revision `0123456789`; `transformer-tiny.multi30k.en-de`, beam 5; "
        f"`python benchmarks/profile_decode.py` → `{path}`"
    )
    assert lines[2:6] == [
        "| Configuration | Sentences | Sent/s | Pieces/s | ms/sentence | Beam steps | Rows/step "
        "| ms/step | Profiled run |",
        "|---|---|---|---|---|---|---|---|---|",
        "| int8, batch 128 | 1,000 | 250.0 | 3,500 | 4.00 | 800 | 400.0 | 5.00 | 1.50× |",
        "| fp32, batch 1 | 1,000 | 250.0 | 3,500 | 4.00 | 800 | 400.0 | 5.00 | 1.50× |",
    ]
    assert lines[7:12] == [
        "| Share · ms per beam step | int8, batch 128 | fp32, batch 1 |",
        "|---|---|---|",
        "| matrix products | 45.4% · 2.27 | 45.4% · 4.54 |",
        "| top-k | 2.5% · 0.12 | 2.5% · 0.25 |",
        "| Python and dispatch overhead | 52.1% · 2.60 | 52.1% · 5.21 |",
    ]
    assert lines[13:17] == [
        "| Configuration | RSS after imports | Model loaded | int8 copy | Peak decoding (+ over "
        "ready) | Weights that decode | Largest step: encoder state + cache + log-probs |",
        "|---|---|---|---|---|---|---|",
        "| int8, batch 128 | 264 | +15 | +34 | 421 (+108) | 6.5 | 1.2 + 10.0 + 19.5 |",
        "| fp32, batch 1 | 264 | +15 | – | 421 (+108) | 6.5 | 1.2 + 10.0 + 19.5 |",
    ]
    assert "imports torch alone holds 225 " in lines[18]
    assert "the model's 9.0 MiB in fp32" in lines[18]

    table = profile_configuration_table(profile_record()["configurations"][0]).splitlines()
    assert table[0] == (
        "**int8, batch 128**: 1000 sentences in 4.00 s, 250.0 sentences/s, 3,500 pieces/s, "
        "4.00 ms per sentence; 800 beam steps of 400.0 rows, 5.00 ms each"
    )
    assert table[2:6] == [
        "| Where the time goes | Share | ms per beam step |",
        "|---|---|---|",
        "| matrix products | 45.4% | 2.270 |",
        "| top-k | 2.5% | 0.125 |",
    ]


def test_the_latest_profile_has_a_section_of_its_own(tmp_path: Path) -> None:
    older = profile_record()
    older["configurations"][0]["precision"] = "bf16"
    write_json(tmp_path / "bench" / "profile-decode-cpu-20261124-000000.json", older)
    newer = write_json(
        tmp_path / "bench" / "profile-decode-cpu-20261125-000000.json", profile_record()
    )
    found = sections(tmp_path)
    assert found["bench"] == NO_BENCHMARKS  # not among the benchmark tables
    assert str(newer) in found["profile"] and "| int8, batch 128 |" in found["profile"]
    assert "bf16, batch 128" not in found["profile"]
    page = "<!-- profile:start -->\nold\n<!-- profile:end -->\n"
    updated = update_sections(page, found)
    assert updated == f"<!-- profile:start -->\n{found['profile']}\n<!-- profile:end -->\n"


# --- The commands recorded in results/models/*.json and the shipped models' cards -----------

RECORDS = [
    *sorted((ROOT / "results" / "models").glob("*.json")),
    *sorted((ROOT / "seq2seq" / "shipped_models").glob("*/card.json")),
]
REPO_PATH = re.compile(r"^(?:configs|scripts|benchmarks|examples|seq2seq)/")
MAKE_TARGET = re.compile(r"^([\w.-]+)\s*:(?!=)", re.MULTILINE)


def simple_commands(command: str) -> list[list[str]]:
    """The words of each simple command of a recorded shell line (split at &&, ;, |), its
    comment and leading VAR=value assignments left out."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands: list[list[str]] = [[]]
    for word in lexer:
        if word in ("&&", ";", "|"):
            commands.append([])
        elif commands[-1] or not re.fullmatch(r"[A-Z_]+=.*", word):
            commands[-1].append(word)
    return [words for words in commands if words]


def command_problems(command: str) -> list[str]:
    """What a recorded command names that the repository does not have: a program other than
    make, bash, python, `seq2seq` and the scripts; a make target, `seq2seq` command or file
    under configs/, scripts/, benchmarks/, examples/ or seq2seq/ that does not exist; the
    old models/ folder."""
    targets = set(MAKE_TARGET.findall((ROOT / "Makefile").read_text(encoding="utf-8")))
    problems = []
    for program, *words in simple_commands(command):
        if Path(program).name in ("python", "python3") and words[:2] == ["-m", "seq2seq"]:
            program, *words = ["seq2seq", *words[2:]]
        elif Path(program).name in ("python", "python3", "bash"):
            program, *words = words
        if program == "make":
            target = next(word for word in words if "=" not in word)
            if target not in targets:
                problems.append(f"make {target}: no such target")
        elif Path(program).name == "seq2seq":
            if words[0] not in COMMANDS:
                problems.append(f"seq2seq {words[0]}: no such command")
        elif not REPO_PATH.match(program):
            problems.append(f"{program}: not a tool of the repository")
        for word in [program, *words]:
            path = word.split("=")[-1]
            if REPO_PATH.match(path) and not (ROOT / path).exists():
                problems.append(f"{path}: no such file")
            if path.startswith("models/"):
                problems.append(f"{path}: models/ is now seq2seq/shipped_models/ or exported/")
    return problems


def test_command_problems_are_found():
    old = "PYTHONPATH=. python3 scripts/export_model.py --checkpoint c.pt --out models/m  # note"
    assert command_problems(old) == [
        "scripts/export_model.py: no such file",
        "models/m: models/ is now seq2seq/shipped_models/ or exported/",
    ]
    assert command_problems("make tarin ARGS='x=1' && seq2seq evaluat --beam 5 | sort") == [
        "make tarin: no such target",
        "seq2seq evaluat: no such command",
        "sort: not a tool of the repository",
    ]
    assert command_problems("scripts/train.py --config configs/nope.toml") == [
        "configs/nope.toml: no such file"
    ]
    assert command_problems("# a note, not a command") == []
    good = (
        "OMP_NUM_THREADS=1 .venv/bin/python scripts/train.py --config "
        "configs/gru.multi30k.en-de.toml train.run_name='\"gru.a\"'  # resumed at step 1200"
    )
    assert command_problems(good) == []
    assert command_problems("python -m seq2seq export --checkpoint c.pt --out exported/m") == []


def test_recorded_commands_exist():
    """Every command in every model record and card runs today: its scripts, make targets,
    `seq2seq` commands and configuration files exist."""
    assert len(RECORDS) == 15
    problems = [
        f"{path.relative_to(ROOT)}: {command}: {problem}"
        for path in RECORDS
        for command in json.loads(path.read_text(encoding="utf-8"))["commands"]
        for problem in command_problems(command)
    ]
    assert not problems, "\n".join(problems)
