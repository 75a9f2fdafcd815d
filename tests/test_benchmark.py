"""The benchmarks and the results tables: every field of a benchmark record, the work of cached
and uncached decoding counted in positions (timings are never asserted), and README sections
generated from result files."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from reversal import prepare_reversal

from seq2seq import benchmark
from seq2seq.benchmark import SYNTHETIC_VOCAB, Settings, precision_name
from seq2seq.checkpoint import CHECKPOINT_FORMAT, save_checkpoint, tokenizer_entry
from seq2seq.config import dump_toml, load_config
from seq2seq.device import autocast_dtype
from seq2seq.errors import UserError
from seq2seq.models import GRUSeq2Seq, build_model
from seq2seq.prepare import PreparedData
from seq2seq.results import (
    NO_BENCHMARKS,
    NO_MODELS,
    ModelResult,
    bench_section,
    sections,
    update_sections,
)

ROOT = Path(__file__).resolve().parents[1]
CPU_PRECISION = precision_name(autocast_dtype("auto", torch.device("cpu")))  # this CPU's default
TINY = [
    "model.embed_dim=32",
    "model.hidden_size=32",
    "model.ffn_size=64",
    "model.encoder_layers=1",
    "model.decoder_layers=1",
    "model.dropout=0.0",
]


@pytest.fixture(scope="module")
def reversal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sizes = {"train": 300, "valid": 10, "test": 30}
    return prepare_reversal(tmp_path_factory.mktemp("reversal"), sizes)


@pytest.fixture
def same_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Measure in the test's process: starting one per measurement would take seconds."""
    monkeypatch.setattr(benchmark, "in_fresh_process", lambda fn, *args: fn(*args))


def throughput_settings(reversal: Path, **changes) -> Settings:
    values = dict(
        models=["gru", "transformer-tiny"],
        overrides=TINY,
        device="cpu",
        data=str(reversal),
        max_tokens=256,
        warmup_steps=1,
        steps=2,
        decode_sentences=12,
        beams=[1, 2],
    )
    return Settings(**{**values, **changes})


def test_throughput_record_has_every_field(
    reversal: Path, tmp_path: Path, same_process: None
) -> None:
    settings = throughput_settings(reversal)
    written = benchmark.save(benchmark.run_throughput(settings), tmp_path / "bench.json")
    assert written == [tmp_path / "bench.json"]
    record = json.loads(written[0].read_text())

    assert record["kind"] == "throughput"
    env = record["environment"]
    assert env["device"] == "cpu" and env["device_name"]
    assert env["torch"] == torch.__version__ and env["threads"] >= 1
    assert env["command"].startswith("python ")
    assert env["git_revision"] is None or re.fullmatch("[0-9a-f]{40}", env["git_revision"])
    assert record["settings"] == json.loads(json.dumps(settings.__dict__))

    assert [model["name"] for model in record["models"]] == settings.models
    for model in record["models"]:
        assert model["config"]["name"] == model["name"]
        assert model["config"]["embed_dim"] == 32  # the overrides apply
        assert model["parameters"] > 0
        training = model["training"]
        assert training["precision"] == CPU_PRECISION and training["steps"] == 2
        assert training["tgt_tokens"] > 0 and training["src_tokens"] > 0
        assert 0 < training["tgt_tokens_per_second"] < training["tokens_per_second"]
        assert training["memory"]["peak_mib"] > 0
        decoding = model["decoding"]
        assert decoding["weights"] == "random" and decoding["checkpoint"] is None
        assert decoding["sentences"] == 12
        assert [beam["beam_size"] for beam in decoding["beams"]] == [1, 2]
        for beam in decoding["beams"]:
            assert beam["sentences_per_second"] > 0 and beam["output_tokens"] > 0
            assert beam["tokens_per_second"] > 0 and 0 <= beam["bleu"] <= 100
        assert decoding["memory"]["peak_mib"] > 0

    table = bench_section(written)
    assert "| Model | Parameters | Train tgt tok/s |" in table
    assert "Greedy sent/s" in table and "Beam 2 sent/s" in table
    assert re.search(r"^\| gru \| 0\.\d\dM \| [\d,]+ \|", table, re.MULTILINE)
    assert re.search(r"^\| transformer-tiny \|.*\| random \|$", table, re.MULTILINE)


def write_checkpoint(reversal: Path, path: Path, name: str) -> None:
    """A checkpoint of the tiny preset `name` with random weights, as training would write it."""
    config = load_config(None, [f"model.name={name}", f'data.prepared="{reversal}"', *TINY])
    data = PreparedData.load(reversal)
    vocab = data.src_tokenizer.vocab_size
    model = build_model(config.model, vocab, vocab, True, verbose=False)
    checkpoint = {
        "format": CHECKPOINT_FORMAT,
        "config": config.to_dict(),
        "model": model.state_dict(),
        "tokenizers": tokenizer_entry(data.src_tokenizer, data.tgt_tokenizer),
        "step": 0,
    }
    save_checkpoint(checkpoint, path)
    (path.parent / "config.toml").write_text(dump_toml(config.to_dict()))


def test_decoding_with_checkpoints(reversal: Path, tmp_path: Path) -> None:
    best = tmp_path / "runs" / "tiny" / "best.pt"
    write_checkpoint(reversal, best, "transformer-tiny")
    found = benchmark.find_checkpoints(tmp_path / "runs", ["gru", "transformer-tiny"], reversal)
    assert found == {"transformer-tiny": str(best)}

    settings = throughput_settings(reversal, checkpoints=found, beams=[1])
    decoding = benchmark.bench_decoding(settings, "transformer-tiny")
    assert decoding["weights"] == "checkpoint" and decoding["checkpoint"] == str(best)
    assert decoding["sentences"] == 12 and decoding["precision"] == CPU_PRECISION
    settings.decode_precision = "int8"
    assert benchmark.bench_decoding(settings, "transformer-tiny")["precision"] == "int8"
    with pytest.raises(UserError, match="holds a transformer-tiny, not a gru"):
        benchmark.bench_decoding(
            throughput_settings(reversal, checkpoints={"gru": str(best)}), "gru"
        )

    write_checkpoint(reversal, tmp_path / "runs" / "tiny-again" / "best.pt", "transformer-tiny")
    with pytest.raises(UserError, match="several transformer-tiny runs"):
        benchmark.find_checkpoints(tmp_path / "runs", ["transformer-tiny"], reversal)


def positions_per_decoder_call(model: torch.nn.Module) -> list[int]:
    """Record how many target positions each call of the decoder (its first layer) processes."""
    seen: list[int] = []
    layer = model.decoder if isinstance(model, GRUSeq2Seq) else model.decoder_layers[0]
    layer.register_forward_hook(lambda module, args, output: seen.append(args[0].shape[1]))
    return seen


@pytest.mark.parametrize(
    ("name", "uncached_calls"),
    [
        # Step t runs the decoder once on all t positions of the prefix.
        ("transformer-tiny", [1, 2, 3, 4, 5, 6]),
        # The recurrence takes one position per call: step t re-runs it t times.
        ("gru", [1] * (1 + 2 + 3 + 4 + 5 + 6)),
    ],
)
def test_cached_decoding_processes_one_position_per_step(
    name: str, uncached_calls: list[int]
) -> None:
    config = load_config(None, [f"model.name={name}", *TINY]).model
    model = build_model(config, SYNTHETIC_VOCAB, SYNTHETIC_VOCAB, True, verbose=False).eval()
    batch = benchmark.synthetic_batch(3, 6, torch.Generator().manual_seed(0))
    assert batch.src.shape == (3, 6) and batch.tgt_in.shape == (3, 6)
    assert batch.num_tgt_tokens == int((batch.tgt_out != 0).sum())
    assert batch.num_src_tokens == int((batch.src != 0).sum())
    seen = positions_per_decoder_call(model)

    cached = benchmark.decode_cached(model, batch.src, batch.src_lens, batch.tgt_in)
    assert seen == [1] * 6  # one call per step, on the new position only
    seen.clear()
    uncached = benchmark.decode_uncached(model, batch.src, batch.src_lens, batch.tgt_in)
    assert seen == uncached_calls
    torch.testing.assert_close(cached, uncached, atol=1e-4, rtol=1e-4)


def test_growth_record_and_plot(tmp_path: Path, same_process: None) -> None:
    settings = Settings(
        models=["gru", "transformer-tiny"],
        overrides=TINY,
        device="cpu",
        lengths=[4, 8],
        batch_size=2,
        repeats=1,
    )
    record = benchmark.run_growth(settings)
    written = benchmark.save(record, tmp_path / "growth.json")
    assert written == [tmp_path / "growth.json", tmp_path / "growth.png"]
    assert written[1].read_bytes().startswith(b"\x89PNG")
    record = json.loads(written[0].read_text())
    assert record["kind"] == "growth" and record["environment"]["device"] == "cpu"
    for model in record["models"]:
        assert model["parameters"] > 0 and model["precision"] == CPU_PRECISION
        assert [case["length"] for case in model["lengths"]] == [4, 8]
        for case in model["lengths"]:
            assert case["train_step_ms"] > 0 and case["decode_cached_ms_per_token"] > 0
            assert case["memory"]["peak_mib"] > 0
            uncached = case["decode_uncached_ms_per_token"]
            assert (uncached is None) == (model["name"] == "gru")
    table = bench_section([written[0]])
    assert f"![Cost growth with sequence length]({written[1]})" in table
    assert re.search(
        r"^\| gru \| 8 \| [\d.,]+ \| [\d,]+ \(\+-?[\d,]+\) \| [\d.]+ \| – \|$", table, re.M
    )


def test_measurements_run_in_a_fresh_process() -> None:
    assert benchmark.in_fresh_process(os.getpid) != os.getpid()


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

Scored on multi30k test; sacreBLEU bleu `case:mixed|tok:13a`, bleu_lc `case:lc|tok:13a`, chrf `c6`.

Transformer tiny (en-de, revision `0123456789`):

```sh
make data
make train
```

GRU (en-de, revision `0123456789`):

```sh
make data
make train
```"""  # noqa: E501


def write_json(path: Path, values: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(values))
    return path


def test_models_table(tmp_path: Path) -> None:
    assert sections(tmp_path) == {"results": NO_MODELS, "bench": NO_BENCHMARKS}
    write_json(tmp_path / "models" / "a.json", {**MODEL_RESULT, "name": "GRU", "bleu": 30.0})
    write_json(tmp_path / "models" / "b.json", MODEL_RESULT)
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
    with pytest.raises(UserError, match="one <!-- other:start --> followed by"):
        update_sections(README, {"other": "x"})
    with pytest.raises(UserError):
        update_sections(README.replace("<!-- bench:end -->", ""), {"bench": "x"})


def test_results_table_script_updates_a_readme(tmp_path: Path) -> None:
    write_json(tmp_path / "results" / "models" / "a.json", MODEL_RESULT)
    readme = tmp_path / "README.md"
    readme.write_text(README)
    script = [sys.executable, str(ROOT / "scripts" / "results_table.py")]
    command = [*script, "--results", str(tmp_path / "results"), "--update", str(readme)]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    text = readme.read_text()
    assert text.startswith("# Title\n<!-- results:start -->\n| Model | Direction |")
    assert f"\n<!-- bench:start -->\n{NO_BENCHMARKS}\n<!-- bench:end -->\nend\n" in text

    command = [*script, "--update", str(tmp_path / "missing.md")]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.startswith("error: --update")


def test_peers_table(tmp_path: Path) -> None:
    toolkit = {"name": "fairseq", "version": "0.12.3", "tgt_tokens_per_step": 2418.4}
    toolkit |= {"tgt_tokens_per_second": [1306.4, 1228.5], "peak_rss_mib": 1553.9}
    record = {"kind": "peers", "device": "CPU", "threads": 2, "torch": "2.13.0", "date": "today"}
    record |= {"git_revision": "0123456789abcdef", "setup": "3+3 layers", "method": "How."}
    record |= {"reproduce": "bash scripts/peers/measure.sh", "toolkits": [toolkit]}
    path = write_json(tmp_path / "peers.json", record)
    assert bench_section([path]).splitlines() == [
        "**Side by side** on CPU, 2 threads, torch 2.13.0, revision `0123456789`, today: "
        f"3+3 layers; `bash scripts/peers/measure.sh` → `{path}`",
        "",
        "| Toolkit | Version | Target tokens per step | Train tgt tok/s (each run) "
        "| Peak RSS MiB |",
        "|---|---|---|---|---|",
        "| fairseq | 0.12.3 | 2,418 | 1,306 / 1,228 | 1,554 |",
        "",
        "How.",
    ]


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
