"""The benchmarks (benchmarks/bench.py): every field of a benchmark record, and the work of
cached and uncached decoding counted in positions (timings are never asserted)."""

import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import bench as benchmark
import pytest
import ship_model
import torch
from bench import SYNTHETIC_VOCAB, BenchmarkSettings
from gpu_profile import busy_seconds, is_kernel, new_profiler, summary
from repetition import GUARDS, Guard, doubled_words
from results_table import bench_section
from reversal import prepare_reversal
from torch.autograd import DeviceType
from torch.autograd.profiler_util import FunctionEvent

from seq2seq.checkpoints import CHECKPOINT_FORMAT, tokenizer_entry
from seq2seq.config_file import dump_toml, load_config
from seq2seq.data.corpora import Tatoeba, UserFiles
from seq2seq.data.prepare import prepare
from seq2seq.data.prepared_corpus import PreparedData, prepare_command, teacher_of
from seq2seq.decoding.model_folder import CARD
from seq2seq.decoding.model_result import SHIPPED_MODELS, ModelResult
from seq2seq.device import autocast_dtype, precision_name
from seq2seq.errors import UserError
from seq2seq.models import GRUSeq2Seq, build_model
from seq2seq.training.checkpoint import save_checkpoint

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


def throughput_settings(reversal: Path, **changes) -> BenchmarkSettings:
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
    return BenchmarkSettings(**{**values, **changes})


@pytest.mark.slow  # trains for seconds
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
        assert decoding["sentences"] == 12 and decoding["batch_size"] == 128
        assert [beam["beam_size"] for beam in decoding["beams"]] == [1, 2]
        for beam in decoding["beams"]:
            assert beam["sentences_per_second"] > 0 and beam["output_tokens"] > 0
            assert beam["tokens_per_second"] > 0 and 0 <= beam["bleu"] <= 100
            (batch,) = beam["batch_seconds"]  # the 12 sentences are one batch
            assert 0 < batch <= beam["seconds"]
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
    settings.decode_batch_size = 5
    decoding = benchmark.bench_decoding(settings, "transformer-tiny")
    assert decoding["precision"] == "int8" and decoding["batch_size"] == 5
    assert len(decoding["beams"][0]["batch_seconds"]) == 3  # 5 + 5 + 2 sentences
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
    settings = BenchmarkSettings(
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
    table = bench_section([written[0]], links_from=tmp_path.parent)
    assert f"![Cost growth with sequence length]({tmp_path.name}/growth.png)" in table
    assert re.search(
        r"^\| gru \| 8 \| [\d.,]+ \| [\d,]+ \(\+-?[\d,]+\) \| [\d.]+ \| – \|$", table, re.M
    )


@pytest.mark.slow  # starts a Python that imports torch
def test_measurements_run_in_a_fresh_process() -> None:
    assert benchmark.in_fresh_process(os.getpid) != os.getpid()


@pytest.mark.slow  # prepares a whole corpus, trains and decodes in other processes
def test_gpu_benchmark_dry_run_writes_its_record(multi30k_en_de: Path, tmp_path: Path) -> None:
    """benchmarks/gpu.sh --dry-run takes every step of the GPU benchmark on the CPU, tiny, and
    its record holds each figure: the validations, time to BLEU, throughput and decoding."""
    env = {**os.environ, "DATA": str(multi30k_en_de), "OUT_DIR": str(tmp_path)}
    env |= {"PYTHON": sys.executable, "TRAIN_ARGS": "train.label_smoothing=0.05"}  # a variant
    env |= {"TRAIN_SECONDS": "900"}
    done = subprocess.run(
        ["bash", "benchmarks/gpu.sh", "--dry-run"], cwd=ROOT, env=env, capture_output=True
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    (path,) = tmp_path.glob("gpu-*.json")
    record = json.loads(path.read_text())
    assert record["environment"]["device"] == "cpu"
    command = (
        "TRAIN_SECONDS=900 TRAIN_ARGS='train.label_smoothing=0.05' bash benchmarks/gpu.sh --dry-run"
    )
    assert record["environment"]["command"] == command
    run = record["training_run"]
    assert run["changes"][-1] == "train.label_smoothing=0.05"
    assert tomllib.loads(run["configuration"])["train"]["label_smoothing"] == 0.05
    assert run["steps"] == run["max_steps"] == 4
    assert [step for step, _ in run["valid_bleu"]] == [2, 4]
    assert set(run["time_to_valid_bleu"]) == {"35", "40"}
    assert run["tgt_tokens_per_second"] > 0
    assert run["seconds"] < run["seconds_to_test_score"]  # training, then the test set
    syncs = record["host_syncs"]  # a CPU waits for nothing: a check that the step runs
    assert syncs["steps_that_logged"] == [1, 2, 4] and syncs["syncs_per_step"] == [0] * 5
    first = run["time_to_test_bleu"]  # the dry run's target is 0: the checkpoint of step 2
    assert (first["step"], first["valid_bleu_target"]) == (2, 0.0) and first["seconds"] > 0
    flops = run["model_flops"]
    assert flops["encoder_weights"] > 0 and flops["decoder_weights"] > 0
    assert flops["bf16_peak_flops_per_second"] is None  # a CPU: no utilisation
    assert [model["name"] for model in record["throughput"]] == ["transformer-tiny"]
    for beam in ("beam5", "beam1"):
        assert record["decoding"][beam]["sentences"] == 10
        assert record["decoding"][beam]["beam_size"] == int(beam[4:])
    warm = record["warm_decoding"]  # a CPU: no waits, and the batches of a CPU
    assert (warm["sentences"], warm["batch_size"], warm["batch_tokens"]) == (10, 1024, 16_000)
    for beam in ("beam5", "beam1"):
        assert warm[beam]["sentences_per_second"] > 0 and warm[beam]["batches"] == 1
        assert set(warm[beam]["syncs_per_step"]) == {0} and warm[beam]["mean_syncs_per_step"] == 0
    check_cpu_profile(record["profile"])


PROFILE_FIGURES = {
    "steps",
    "wall_seconds_per_step",
    "gpu_busy_seconds_per_step",
    "gpu_busy_share",
    "kernel_launches_per_step",
    "aten_operators_per_step",
    "top_by_self_cuda",
    "top_by_self_cpu",
}


def check_cpu_profile(profile: dict) -> None:
    """The profile of gpu.sh's dry run (benchmarks/gpu_profile.py, 2 steps after 2): on a CPU
    the GPU's figures are null, the host's positive."""
    assert set(profile) == {"config", "overrides", "device", "training", "decoding"}
    assert profile["device"] == "cpu"
    training, decoding = profile["training"], profile["decoding"]
    extra = {"warmup_steps", "target_tokens_per_step", "unprofiled_wall_seconds_per_step"}
    assert set(training) == PROFILE_FIGURES | extra
    assert set(decoding) == PROFILE_FIGURES | {
        "sentences",
        "beam_size",
        "batch_size",
        "precision",
        "batches",
    }
    assert (training["steps"], training["warmup_steps"]) == (2, 2)
    assert training["target_tokens_per_step"] > 0
    assert training["unprofiled_wall_seconds_per_step"] > 0
    assert (decoding["sentences"], decoding["beam_size"], decoding["batch_size"]) == (10, 5, 1024)
    assert (decoding["precision"], decoding["batches"]) == ("fp32", 1)
    assert decoding["steps"] > 1  # decode_step calls: one per output position
    for part in (training, decoding):
        for gpu_figure in ("gpu_busy_seconds_per_step", "gpu_busy_share"):
            assert part[gpu_figure] is None
        assert part["kernel_launches_per_step"] is None and part["top_by_self_cuda"] is None
        assert part["wall_seconds_per_step"] > 0 and part["aten_operators_per_step"] > 0
        top = part["top_by_self_cpu"]
        assert 0 < len(top) <= 15 and {"aten::mm", "aten::addmm"} & {row["name"] for row in top}
        for row in top:
            assert set(row) == {"name", "calls", "total_ms", "ms_per_step"}
            assert row["calls"] > 0 and row["total_ms"] > 0
            assert row["ms_per_step"] == pytest.approx(row["total_ms"] / part["steps"])
        totals = [row["total_ms"] for row in top]
        assert totals == sorted(totals, reverse=True)


def test_busy_time_counts_overlapping_kernels_once() -> None:
    assert busy_seconds([]) == 0
    assert busy_seconds([(0.0, 2.0), (5.0, 6.0)]) == 3.0  # disjoint: the sum
    assert busy_seconds([(5.0, 6.0), (0.0, 2.0), (1.0, 3.0)]) == 4.0  # [0, 3] and [5, 6]
    assert busy_seconds([(0.0, 10.0), (2.0, 3.0), (4.0, 12.0)]) == 12.0  # inside, then past
    assert busy_seconds([(0.0, 1.0), (1.0, 2.0)]) == 2.0  # touching


def test_kernels_are_the_device_events_but_copies_and_fills() -> None:
    """By name and device alone, as torch 2.11's events (no `activity_type`) allow."""

    def event(name: str, device_type: DeviceType) -> FunctionEvent:
        return FunctionEvent(0, name, 0, 0, 1, device_type=device_type)

    assert is_kernel(event("void at::native::vectorized_elementwise_kernel<4>", DeviceType.CUDA))
    assert not is_kernel(event("Memcpy HtoD (Pageable -> Device)", DeviceType.CUDA))
    assert not is_kernel(event("Memset (Device)", DeviceType.CUDA))
    assert not is_kernel(event("aten::mm", DeviceType.CPU))


def test_profile_summary_of_a_cpu_profile() -> None:
    """Three matrix products profiled on a CPU: their calls per step and times; no GPU."""
    cpu = torch.device("cpu")
    profiler, matrix = new_profiler(cpu), torch.ones(8, 8)
    with profiler:
        for _ in range(3):
            torch.mm(matrix, matrix)
    figures = summary(profiler, 3, 0.3, cpu)
    assert figures["steps"] == 3 and figures["wall_seconds_per_step"] == pytest.approx(0.1)
    assert figures["gpu_busy_seconds_per_step"] is None and figures["gpu_busy_share"] is None
    assert figures["kernel_launches_per_step"] is None and figures["top_by_self_cuda"] is None
    top = figures["top_by_self_cpu"]
    assert (top[0]["name"], top[0]["calls"]) == ("aten::mm", 3)
    assert top[0]["ms_per_step"] == pytest.approx(top[0]["total_ms"] / 3)
    # every host event here is an aten operator (aten::mm, and those it calls)
    assert all(row["name"].startswith("aten::") for row in top)
    assert figures["aten_operators_per_step"] == sum(row["calls"] for row in top) / 3


def test_gpu_benchmark_refuses_an_unknown_option() -> None:
    done = subprocess.run(
        ["bash", "benchmarks/gpu.sh", "--fast"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr == "error: unknown option --fast (expected --dry-run or nothing)\n"


# What the GPU machine of benchmarks/tatoeba_gpu.sh lacks: the serving and CTranslate2 packages
ABSENT_ON_THE_GPU = ["fastapi", "uvicorn", "pydantic", "prometheus_client", "ctranslate2"]


def tiny_tatoeba(shared_data: Path, folder: Path) -> Path:
    """`folder`/data with tatoeba-v2.en-fr and tatoeba-v2.fr-en prepared from every 100th
    Tatoeba pair (1,200 to train, 20 to validate, 20 to test), copy-teaching, concatenation and
    the alignment teacher's links as in the configurations of the next models, a vocabulary of
    400."""
    with gzip.open(shared_data / "tatoeba-eng-fra" / "fra.txt.gz", "rt", encoding="utf-8") as f:
        pairs = [line.rstrip("\n").split("\t")[:2] for n, line in enumerate(f) if n % 100 == 0]
    splits = {"train": pairs[:1200], "valid": pairs[1200:1220], "test": pairs[1220:1240]}
    raw = folder / "raw"
    raw.mkdir(parents=True)
    for split, split_pairs in splits.items():
        for side, lang in enumerate(("en", "fr")):
            lines = "".join(pair[side] + "\n" for pair in split_pairs)
            (raw / f"{split}.{lang}").write_text(lines, encoding="utf-8")
    for src, tgt in (("en", "fr"), ("fr", "en")):
        files = UserFiles.from_options(src, tgt, str(raw), {})
        out = folder / "data" / f"tatoeba-v2.{src}-{tgt}"
        config = load_config(ROOT / "configs" / f"transformer.tatoeba-v2.{src}-{tgt}.toml")
        prepare(
            "files",
            src,
            tgt,
            out,
            vocab_size=400,
            files=files,
            **config.data.augmentation,
            align_teacher=teacher_of(config),
        )
    return folder / "data"


def without_packages(folder: Path, names: list[str]) -> str:
    """A folder for PYTHONPATH in which importing each of `names` fails, as where none is
    installed."""
    for name in names:
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text(f"raise ImportError('no {name} here')\n")
    return str(folder)


@pytest.mark.slow  # trains two models and decodes in other processes
def test_tatoeba_gpu_dry_run_writes_what_ships(shared_data: Path, tmp_path: Path) -> None:
    """benchmarks/tatoeba_gpu.sh --dry-run trains both directions (tiny), averages the last 5
    checkpoints, exports and evaluates each on the test, entity and realistic tests, without the
    packages the GPU machine lacks, and leaves each exported folder, record, log and the
    summary."""
    data = tiny_tatoeba(shared_data, tmp_path)
    folders = ["tatoeba-v2.en-fr", "tatoeba-v2.fr-en"]
    subprocess.run(["tar", "cJf", "tatoeba-v2.tar.xz", *folders], cwd=data, check=True)
    for folder in folders:  # carried packed, as they fit a transfer beside the repository
        shutil.rmtree(data / folder)
    env = {**os.environ, "DATA_DIR": str(data), "OUT": "unused"}
    env["PYTHONPATH"] = without_packages(tmp_path / "absent", ABSENT_ON_THE_GPU)
    env["PYTHON"] = sys.executable
    out = tmp_path / "out"
    done = subprocess.run(
        ["bash", "benchmarks/tatoeba_gpu.sh", "--dry-run", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == f"unpacked {data}/tatoeba-v2.tar.xz"
    assert lines[-1].startswith(f"results in {out}: summary.json ")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["device"] == "cpu (a dry run)" and summary["train_seconds"] == 420
    assert set(summary["seconds"]) == {"training", "after_training", "script"}
    for direction in ("en-fr", "fr-en"):
        name = f"transformer-small.tatoeba.{direction}"
        files = sorted(path.name for path in (out / name).iterdir())
        assert files == ["model.json", "model.safetensors", "sentencepiece.model"]
        record = ModelResult.load(out / f"{name}.json")
        assert (record.model, record.direction, record.split) == (
            "transformer-small",
            direction,
            "test",
        )
        assert (record.beam_size, record.decode_precision) == (5, "fp32")
        assert (record.averaged_checkpoints, record.train_steps) == (5, 10)
        src, tgt = direction.split("-")
        runs = f"checkpoints/transformer.tatoeba-v2.{direction}"
        # the copy-teaching settings of each configuration: more repeated digits for fr-en; the
        # split by both sides, the default; the teacher of the alignment head
        repeated = " --augment-repeated-digits 0.5" if direction == "fr-en" else ""
        assert record.commands == [  # as they run here, the evaluation as it ran there
            f"seq2seq prepare --corpus tatoeba --src {src} --tgt {tgt} --augment-entities 2 "
            f"--augment-numbers 20{repeated} --augment-world-names 0.5 --augment-codes 0.25 "
            "--augment-contacts 0.1 --concat-share 0.25 --seed 1 --align-teacher eflomal "
            f"--mirror ../shared/data --out data/tatoeba-v2.{direction}",
            f"seq2seq train --config configs/transformer.tatoeba-v2.{direction}.toml "
            f"train.device=cpu train.run_dir={runs}  # by benchmarks/tatoeba_gpu.sh beside the "
            "other direction, stopped with SIGTERM after at most 420 s",
            f"seq2seq average --out {runs}/avg5.pt --last 5 {runs}",
            f"seq2seq export --checkpoint {runs}/avg5.pt --out exported/{name}",
            f"seq2seq evaluate --model {out / name} --split test --beam 5 --precision fp32 "
            "--keep-numbers",  # the configurations' decoding: the number guard
        ]
        entities = record.entity_test
        assert entities["sentences"] == 300 and entities["beam_size"] == 5
        assert entities["names"] == 300 and "number_copy_accuracy" in entities
        realistic = record.realistic_entity_test
        assert realistic["sentences"] == 330 and realistic["beam_size"] == 5
        log = (out / f"{name}.train.log").read_text(encoding="utf-8")
        assert log.count(" step 10 ") >= 1
        model = summary["models"][name]
        assert [step for step, _ in model["valid_bleu"]] == [2, 4, 6, 8, 10]
        assert model["new"]["bleu"] == round(record.bleu, 2)
        assert model["new"]["realistic_entity_copy_accuracy"] == round(
            realistic["entity_copy_accuracy"], 2
        )
        assert model["targets_met"] == {  # 10 steps: none of issues 44's and 59's targets
            "bleu": False,
            "chrf": False,
            "entities_number_copy_accuracy": False,
            "entities_name_copy_accuracy": False,
            "realistic_entity_copy_accuracy": False,
        }
        card = ModelResult.load(SHIPPED_MODELS / name / "card.json")
        assert model["shipped"]["chrf"] == round(card.chrf, 2)
        assert model["shipped"]["entities_name_copy_accuracy"] == round(
            card.entity_test["name_copy_accuracy"], 2
        )


@pytest.mark.parametrize("shown_in", ["benchmarks/tatoeba_gpu.sh", "docs/training.md"])
def test_the_tatoeba_gpu_folders_are_shown_prepared_as_their_configurations_say(
    shown_in: str,
) -> None:
    """The commands that prepare the folders of benchmarks/tatoeba_gpu.sh, in its header and in
    the docs, are those of the configurations (the teacher's links included), from the mirror."""
    text = re.sub(r" \\\n[# ]*", " ", (ROOT / shown_in).read_text(encoding="utf-8"))
    shown = re.findall(r"\.venv/bin/(seq2seq prepare .* --out data/tatoeba-v2\.\S+)", text)
    assert shown == [
        prepare_command(
            load_config(ROOT / "configs" / f"transformer.tatoeba-v2.{direction}.toml")
        ).replace(" --out ", " --mirror ../shared/data --out ")
        for direction in ("en-fr", "fr-en")
    ]


def test_tatoeba_gpu_names_a_missing_folder(tmp_path: Path) -> None:
    env = {**os.environ, "DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        ["bash", "benchmarks/tatoeba_gpu.sh", str(tmp_path / "out")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"error: {tmp_path}/tatoeba-v2.en-fr: not a prepared corpus, nor in "
        f"{tmp_path}/tatoeba-v2.tar.xz; prepare and pack it (see benchmarks/tatoeba_gpu.sh) "
        "and carry it here\n"
    )
    assert not (tmp_path / "out").exists()


def test_tatoeba_gpu_leaves_earlier_results_as_they_are(tmp_path: Path) -> None:
    for direction in ("en-fr", "fr-en"):
        (tmp_path / f"tatoeba-v2.{direction}").mkdir()
        (tmp_path / f"tatoeba-v2.{direction}" / "manifest.json").write_text("{}")
    earlier = tmp_path / "out" / "transformer-small.tatoeba.en-fr"
    earlier.mkdir(parents=True)
    (earlier / "model.json").write_text("{}")
    done = subprocess.run(
        ["bash", "benchmarks/tatoeba_gpu.sh", str(tmp_path / "out")],
        cwd=ROOT,
        env={**os.environ, "DATA_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr == f"error: {earlier} exists; give another folder\n"
    assert [path.name for path in (tmp_path / "out").rglob("*")] == [earlier.name, "model.json"]


@pytest.mark.parametrize(("suffix", "packed"), [("xz", "an xz-compressed"), ("gz", "a gzipped")])
def test_tatoeba_gpu_names_an_archive_it_cannot_unpack(
    suffix: str, packed: str, tmp_path: Path
) -> None:
    (tmp_path / f"tatoeba-v2.tar.{suffix}").write_bytes(b"not packed")
    done = subprocess.run(
        ["bash", "benchmarks/tatoeba_gpu.sh", str(tmp_path / "out")],
        cwd=ROOT,
        env={**os.environ, "DATA_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"error: {tmp_path}/tatoeba-v2.tar.{suffix}: not {packed} tar of the prepared folders\n"
    )


def test_tatoeba_gpu_refuses_an_unknown_option() -> None:
    done = subprocess.run(
        ["bash", "benchmarks/tatoeba_gpu.sh", "--fast"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr == "error: unknown option --fast (expected --dry-run or a folder)\n"


REVERSE = "transformer-tiny.multi30k.de-en"  # the opposite model of an alignment test


def exported_with_record(folder: Path, name: str, **changes: object) -> Path:
    """`folder`/NAME: the shipped model NAME's files as `seq2seq export` writes them, and beside
    them NAME.json: its card as a record of tatoeba_gpu.sh would be (evaluated from the folder,
    with both entity tests and an alignment test, no limits), changed by `changes`."""
    exported = folder / name
    exported.mkdir(parents=True)
    for file in ("model.json", "model.safetensors", "sentencepiece.model"):
        shutil.copyfile(SHIPPED_MODELS / name / file, exported / file)
    card = json.loads((SHIPPED_MODELS / name / CARD).read_text(encoding="utf-8"))
    evaluation = f"seq2seq evaluate --model {exported} --split SPLIT --beam 5 --precision fp32"
    record = {
        **card,
        "commands": [*card["commands"][:-1], evaluation.replace("SPLIT", "test")],
        "limits": [],
        "git_revision": "unknown",
        "entity_test": {
            "git_revision": "unknown",
            "number_copy_accuracy": 99.3,
            "name_copy_accuracy": 96.0,
            "command": evaluation.replace("SPLIT", "entities"),
        },
        "realistic_entity_test": {
            "git_revision": "unknown",
            "entity_copy_accuracy": 30.6,
            "command": evaluation.replace("SPLIT", "realistic"),
        },
        "alignment_test": {
            "git_revision": "unknown",
            "command": f"seq2seq align --model {exported} --reverse-model {folder}/{REVERSE} "
            "--input pairs.txt --gold gold.txt",
        },
        **changes,
    }
    exported.with_name(f"{name}.json").write_text(json.dumps(record), encoding="utf-8")
    return exported


def test_ship_model_makes_the_exported_folder_the_shipped_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The files are copied as they are; the card is the record, evaluated by the model's name
    (an alignment's reverse model by its folder's), with the replaced card's limits translated
    again (the same weights here: the same outputs)."""
    name = "transformer-tiny.multi30k.en-de"
    card = json.loads((SHIPPED_MODELS / name / CARD).read_text(encoding="utf-8"))
    exported = exported_with_record(tmp_path / "results", name)
    models, records = tmp_path / "models", tmp_path / "records"
    (models / name).mkdir(parents=True)
    (models / name / "model.safetensors").write_bytes(b"the old weights")
    stale = {**card, "limits": [{**limit, "output": "stale"} for limit in card["limits"]]}
    (models / name / CARD).write_text(json.dumps(stale), encoding="utf-8")
    revision = "0123456789abcdef0123456789abcdef01234567"
    options = ["--models-dir", str(models), "--results-dir", str(records), "--revision", revision]
    ship_model.main([str(exported), *options])
    shipped = models / name
    assert sorted(path.name for path in shipped.iterdir()) == [
        CARD,
        "model.json",
        "model.safetensors",
        "sentencepiece.model",
    ]
    for file in ("model.json", "model.safetensors", "sentencepiece.model"):
        assert (shipped / file).read_bytes() == (exported / file).read_bytes()
    new = json.loads((shipped / CARD).read_text(encoding="utf-8"))
    assert new["limits"] == card["limits"] and len(card["limits"]) >= 2
    evaluation = f"seq2seq evaluate --model {name} --split SPLIT --beam 5 --precision fp32"
    assert new["commands"][:-1] == card["commands"][:-1]
    assert new["commands"][-1] == evaluation.replace("SPLIT", "test")
    assert new["entity_test"]["command"] == evaluation.replace("SPLIT", "entities")
    # evaluated without .git on the GPU machine: the revision given
    assert new["git_revision"] == new["entity_test"]["git_revision"] == revision
    realistic = new["realistic_entity_test"]
    assert realistic["command"] == evaluation.replace("SPLIT", "realistic")
    assert (realistic["git_revision"], realistic["entity_copy_accuracy"]) == (revision, 30.6)
    assert new["alignment_test"] == {  # both models by the names they ship as
        "git_revision": revision,
        "command": f"seq2seq align --model {name} --reverse-model {REVERSE} --input pairs.txt "
        "--gold gold.txt",
    }
    assert json.loads((records / f"{name}.shipped.json").read_text(encoding="utf-8")) == new
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == (
        f"shipped {name}: test BLEU {card['bleu']:.2f}, chrF {card['chrf']:.2f}; entity test: "
        "numbers copied 99.3%, names 96.0%"
    )
    first = card["limits"][0]
    assert printed[1] == f"  limit {first['problem']}: {first['source']} -> {first['output']}"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"direction": "de-en"}, "the record is of de-en, not the model's direction"),
        ({"entity_test": {}}, "no entity_test; add it with seq2seq evaluate --model"),
    ],
)
def test_ship_model_refuses_a_record_that_does_not_fit(
    tmp_path: Path, changes: dict, message: str
) -> None:
    name = "transformer-tiny.multi30k.en-de"
    exported = exported_with_record(tmp_path / "results", name, **changes)
    models = tmp_path / "models"
    with pytest.raises(UserError, match=re.escape(message)):
        ship_model.ship(exported, models, tmp_path / "records")
    assert not models.exists() and not (tmp_path / "records").exists()


def test_the_repetition_benchmark_counts_words_repeated_at_once() -> None:
    assert doubled_words(["Id schöne Sie Sie minn Sie.", "a b a b", "Der der Hund", ""]) == 2
    labels = [guard.label for guard in GUARDS]
    assert labels[0] == "none" and GUARDS[0] == Guard("none")  # the baseline first
    assert len(set(labels)) == len(labels)


TRANSLATION = {  # the words of `_word_mirror`'s pairs
    "red": "rouge", "dog": "chien", "cat": "chat", "big": "gros", "old": "vieux",
    "house": "maison", "tree": "arbre", "small": "petit", "car": "voiture", "sea": "mer",
    "bread": "pain", "horse": "cheval", "!": "!",
}  # fmt: skip


def _word_mirror(folder: Path, count: int) -> Path:
    """A Tatoeba mirror of `count` pairs whose words always go together ("Red dog!" and "Chien
    rouge!"), in random order, so that the test split holds some of them."""
    rng = random.Random(0)
    lines = []
    for _ in range(count):
        english = rng.sample(list(TRANSLATION)[:-1], rng.randint(2, 5))
        french = [TRANSLATION[word] for word in rng.sample(english, len(english))]
        lines.append(f"{' '.join(english).capitalize()}!\t{' '.join(french).capitalize()}!\n")
    mirror = folder / "tatoeba-eng-fra"
    mirror.mkdir(parents=True)
    with gzip.open(mirror / "fra.txt.gz", "wt", encoding="utf-8") as out:
        out.writelines(lines)
    return mirror / "fra.txt.gz"


@pytest.mark.parametrize("style", ["spaces", "hansards"])
def test_alignment_silver_links_the_test_pairs_as_the_teacher(tmp_path: Path, style: str) -> None:
    mirror = _word_mirror(tmp_path / "data", 2000)
    out = tmp_path / "silver"
    silver = [sys.executable, "benchmarks/alignment_silver.py", "--data", str(tmp_path / "data")]
    done = subprocess.run(
        [*silver, "--out", str(out), "--words", style],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    splits = Tatoeba().pairs("en", "fr", {"fra.txt.gz": mirror})
    test = [(en, fr) for split, en, fr in splits if split == "test"]
    if style == "hansards":  # lowercased, "!" a word of its own
        test = [tuple(side.lower().replace("!", " !") for side in pair) for pair in test]
    pairs = (out / "tatoeba-test.src-tgt").read_text(encoding="utf-8").splitlines()
    assert pairs == [f"{en} ||| {fr}" for en, fr in test] and 20 <= len(pairs) < 200
    gold = (out / "tatoeba-test.gold").read_text(encoding="utf-8").splitlines()
    assert len(gold) == len(pairs)
    links = [
        (en.lower().split()[i - 1], fr.lower().split()[j - 1])
        for (en, fr), line in zip(test, gold, strict=True)
        for i, j in (map(int, link.split("-")) for link in line.split())
    ]
    right = [TRANSLATION[_bare(en)] == _bare(fr) for en, fr in links]
    # eflomal samples at random: most words linked, nearly all rightly
    assert sum(right) >= 0.95 * len(links)
    assert len(links) >= 0.8 * sum(len(en.split()) for en, _ in test)


def _bare(word: str) -> str:
    """A word without its "!", or "!" alone."""
    return word.rstrip("!") or "!"


def test_alignment_silver_names_a_missing_corpus(tmp_path: Path) -> None:
    silver = [sys.executable, "benchmarks/alignment_silver.py", "--data", str(tmp_path)]
    done = subprocess.run(
        [*silver, "--out", str(tmp_path / "silver")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"error: --data {tmp_path}: no tatoeba-eng-fra/fra.txt.gz\n"
    assert not (tmp_path / "silver").exists()
