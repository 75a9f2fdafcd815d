"""The attention history of a run: the maps it holds are the model's at each step, the file
stays under its bound, a kill leaves it readable, resuming keeps it consistent, and a damaged
or foreign file is one line; the explorer's routes over it."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from commands import run_in_process
from explorer_models import EN_DE
from fastapi.testclient import TestClient
from reversal import ENV, tiny_overrides
from safetensors.torch import save as save_tensors

from seq2seq.config_file import load_config
from seq2seq.data.prepared_corpus import PreparedData
from seq2seq.decoding.attention_maps import teacher_forced_maps
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.errors import UserError
from seq2seq.files import read_lines
from seq2seq.serving import run_history
from seq2seq.serving.app import create_app
from seq2seq.serving.registry import served_model
from seq2seq.training import loop as train_module
from seq2seq.training.attention_history import (
    FILE_NAME,
    FORMAT,
    MAX_PIECES,
    AttentionHistory,
    add_snapshot,
    choose_sentences,
    kept_steps,
    load_history,
    read_index,
    run_history_file,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def data(reversal: Path) -> PreparedData:
    return PreparedData.load(reversal)


def valid_lines(prepared: Path) -> tuple[list[str], list[str]]:
    return read_lines(prepared / "valid.src"), read_lines(prepared / "valid.tgt")


def test_the_sentences_are_the_first_valid_pairs_of_at_most_20_pieces(data) -> None:
    long = " ".join("abcdefghijklmnop" * 2)  # 32 letters: over MAX_PIECES
    lines = (["a b", long, "c d e", "f", "g h"], ["b a", "x", long, "f", "h g"])
    chosen = choose_sentences(data.src_tokenizer, data.tgt_tokenizer, lines, 3)
    assert [s.source for s in chosen] == ["a b", "f", "g h"]
    first = chosen[0]
    assert first.src_pieces[-1] == first.tgt_pieces[-1] == "</s>"
    assert len(first.src_pieces) == len(first.src_ids) + 1 <= MAX_PIECES + 1
    assert data.tgt_tokenizer.decode([first.tgt_ids])[0] == "b a"


def test_thinning_keeps_the_first_the_latest_and_the_multiples_of_the_stride() -> None:
    assert kept_steps([1, *range(100, 1001, 100), 1050], 200) == [1, *range(200, 1001, 200), 1050]
    assert kept_steps([1, 300, 500], 1000) == [1, 500]
    assert kept_steps([7], 2) == [7]


def test_snapshots_replace_later_steps_and_thin_to_the_bound(
    data, tiny_model, tmp_path: Path
) -> None:
    model = tiny_model("transformer", vocab_size=data.src_tokenizer.vocab_size).eval()
    lines = (["a b c", "d e f g"], ["c b a", "g f e d"])
    sentences = choose_sentences(data.src_tokenizer, data.tgt_tokenizer, lines, 2)
    path = tmp_path / FILE_NAME
    cpu = torch.device("cpu")
    add_snapshot(path, 1, model, sentences, cpu)
    one = path.stat().st_size
    bound = 6 * one  # room for about six snapshots
    for step in range(100, 4001, 100):
        assert add_snapshot(path, step, model, sentences, cpu, bound) is None
        assert path.stat().st_size <= bound
    steps = load_history(path).steps  # every 800th step: every 400th would be 11 snapshots
    assert steps == [1, 800, 1600, 2400, 3200, 4000]
    # a run resumed from step 2000 redoes its later steps: they go, and come back as redone
    add_snapshot(path, 2000, model, sentences, cpu, bound)
    assert load_history(path).steps == [s for s in steps if s < 2000] + [2000]
    # other sentences (train.attention_history changed, other data): the file starts again
    note = add_snapshot(path, 2100, model, sentences[:1], cpu, bound)
    assert note == f"{path}: holds other sentences or another model; starting it again"
    assert load_history(path).steps == [2100]


def test_a_damaged_or_foreign_file_is_one_line(data, tiny_model, tmp_path: Path) -> None:
    model = tiny_model("gru", vocab_size=data.src_tokenizer.vocab_size).eval()
    sentences = choose_sentences(data.src_tokenizer, data.tgt_tokenizer, (["a b"], ["b a"]), 1)
    path = tmp_path / FILE_NAME
    add_snapshot(path, 1, model, sentences, torch.device("cpu"))
    good = path.read_bytes()
    index = read_index(good)
    wrong_shape = save_tensors(
        {"step1/sentence0/bahdanau": torch.zeros(2, 2, dtype=torch.float16)},
        metadata={"index": json.dumps(index)},
    )
    bad = {
        "truncated": good[: len(good) // 2],
        "empty": b"",
        "a pickle": b"\x80\x04\x95" + b"\x00" * 40,
        "no index": save_tensors({"x": torch.zeros(1)}),
        "another format": good.replace(FORMAT.encode(), b"seq2seq attention history 9"),
        "a wrong shape": wrong_shape,
    }
    for what, content in bad.items():
        path.write_bytes(content)
        with pytest.raises(UserError) as err:
            load_history(path)
        message = str(err.value)
        assert message.startswith(f"{path}: not an attention history of seq2seq ("), what
        assert "\n" not in message, what
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match=f"^--run {empty}: no {FILE_NAME} in it"):
        run_history_file("--run", str(empty))
    # a damaged file met during training is started again, with a line for the log
    note = add_snapshot(path, 5, model, sentences, torch.device("cpu"))
    assert note.startswith(f"{path}: not an attention history of seq2seq (")
    assert load_history(path).steps == [5]


def history_with(index: object, tensors: dict[str, torch.Tensor]) -> bytes:
    return save_tensors(tensors, metadata={"index": json.dumps(index)})


def test_an_index_claiming_more_than_the_file_holds_builds_nothing(tmp_path: Path) -> None:
    """The counts of steps, sentences and maps are checked against the tensors before anything
    is built: an index of 20,000 steps x 2,000 sentences is refused at once, and one with no
    maps, whose empty snapshots no tensor bounds, too."""
    sentence = {"source": "a", "reference": "b", "src_ids": [5], "tgt_ids": [6]}
    sentence |= {"src_pieces": ["a", "</s>"], "tgt_pieces": ["b", "</s>"]}
    path = tmp_path / FILE_NAME
    cases = {
        "20000 x 2000 x 1": (20_000, 2_000, ["bahdanau"]),
        "2000 x 1000 x 0": (2_000, 1_000, []),
    }
    for counts, (steps, sentences, maps) in cases.items():
        index = {"format": FORMAT, "arch": "gru", "maps": maps, "steps": list(range(steps))}
        index["sentences"] = [sentence] * sentences
        one = {"step0/sentence0/bahdanau": torch.zeros(2, 2, dtype=torch.float16)}
        path.write_bytes(history_with(index, one if maps else {}))
        with pytest.raises(UserError) as caught:
            load_history(path)
        tensors = len(maps)
        assert str(caught.value) == (
            f"{path}: not an attention history of seq2seq ({tensors} tensors for its {counts} "
            "steps x sentences x maps)"
        )


def test_json_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    deep = "[" * 100_000
    header = deep.encode()
    path = tmp_path / FILE_NAME
    in_index = save_tensors({}, metadata={"index": deep})
    for content in (in_index, len(header).to_bytes(8, "little") + header):
        path.write_bytes(content)
        with pytest.raises(UserError) as caught:
            run_history_file("--run", str(tmp_path))
        assert str(caught.value) == (
            f"--run {path}: not an attention history of seq2seq (nested too deeply)"
        )


@pytest.mark.slow  # trains for seconds
@pytest.mark.parametrize("arch", ["transformer", "gru"])
def test_the_file_holds_the_models_maps_at_each_step(reversal: Path, tmp_path: Path, arch) -> None:
    run_dir = tmp_path / "run"
    overrides = tiny_overrides(arch, reversal, run_dir)
    overrides += ["train.max_steps=10", "train.valid_every=5", "train.keep_last=2"]
    overrides += ["train.valid_max_sentences=10", "train.attention_history=3"]
    cfg = load_config(None, overrides)
    train_module.train(cfg)
    history = load_history(run_dir / FILE_NAME)
    assert history.steps == [1, 5, 10]
    assert history.arch == arch
    sources, references = valid_lines(reversal)
    assert [s.source for s in history.sentences] == sources[:3]
    assert [s.reference for s in history.sentences] == references[:3]
    names = {"transformer": ["cross", "decoder_self", "encoder_self"], "gru": ["bahdanau"]}[arch]
    for step in (5, 10):
        model = load_model(run_dir / f"step-{step}.pt").model
        for sentence, maps in zip(history.sentences, history.snapshots[step], strict=True):
            expected = teacher_forced_maps(
                model, sentence.src_ids, sentence.tgt_ids, torch.device("cpu")
            )
            assert sorted(maps) == names
            for name, weights in maps.items():
                assert weights.dtype == torch.float16
                assert torch.equal(weights, expected[name].half())
                # the teacher-forced rows of a distribution: each sums to 1 (fp16 rounding)
                assert torch.allclose(weights.float().sum(-1), torch.ones(1), atol=1e-2)


@pytest.mark.slow  # starts Python processes that import torch
def test_kill_9_while_writing_leaves_a_readable_file(data, reversal: Path, tmp_path: Path) -> None:
    """A process that writes snapshot after snapshot is killed at several moments: each time
    the file reads whole, with the steps of one of its writes."""
    path = tmp_path / FILE_NAME
    writer = (
        "import sys, torch, tiny\n"
        "from pathlib import Path\n"
        "from seq2seq.data.prepared_corpus import PreparedData\n"
        "from seq2seq.training.attention_history import add_snapshot, choose_sentences\n"
        "data = PreparedData.load(sys.argv[1])\n"
        "lines = (['a b c d e f g h'] * 4, ['h g f e d c b a'] * 4)\n"
        "sentences = choose_sentences(data.src_tokenizer, data.tgt_tokenizer, lines, 4)\n"
        "model = tiny.tiny_model('transformer', data.src_tokenizer.vocab_size).eval()\n"
        "step, BOUND = 0, 300_000\n"
        "while True:\n"
        "    step += 1\n"
        "    add_snapshot(Path(sys.argv[2]), step, model, sentences, torch.device('cpu'), BOUND)\n"
    )
    env = {**ENV, "PYTHONPATH": str(ROOT / "tests")}
    for wait in (0.0, 0.05, 0.13, 0.31):
        process = subprocess.Popen(
            [sys.executable, "-c", writer, str(reversal), str(path)], env=env, cwd=ROOT
        )
        deadline = time.monotonic() + 120
        while not path.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(wait)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        steps = load_history(path).steps
        assert steps[0] == 1 and steps == sorted(steps)
        assert path.stat().st_size <= 300_000
        path.unlink()
        for stale in tmp_path.glob(f".{FILE_NAME}.*.tmp"):
            stale.unlink()  # what a killed write leaves; the next run's start deletes it


def test_explore_on_a_bad_run_file_is_one_line_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)  # serve sets it: restored after
    (tmp_path / FILE_NAME).write_bytes(b"not safetensors")
    result = run_in_process(["explore", "--port", "0", "--run", str(tmp_path)])
    assert result.returncode == 2
    assert result.stderr == (
        f"error: --run {tmp_path / FILE_NAME}: not an attention history of seq2seq (a header of "
        "7,306,634,592,548,843,374 bytes in a file of 15)\n"
    )
    assert result.stdout == ""


def test_the_routes_answer_the_files_index_and_maps(
    data, tiny_model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is read in a worker thread, once per change however many requests come, and
    an error names it relative to the run folder, not by the server's path."""
    reads = []

    def load_and_record(path: Path, name: str | None = None) -> AttentionHistory:
        try:
            asyncio.get_running_loop()
            reads.append("in the event loop")
        except RuntimeError:
            reads.append("in a worker thread")
        return load_history(path, name)

    monkeypatch.setattr(run_history, "load_history", load_and_record)
    model = tiny_model("transformer", vocab_size=data.src_tokenizer.vocab_size).eval()
    lines = (["a b c", "d e"], ["c b a", "e d"])
    sentences = choose_sentences(data.src_tokenizer, data.tgt_tokenizer, lines, 2)
    path = tmp_path / "my-run" / FILE_NAME
    for step in (1, 50):
        add_snapshot(path, step, model, sentences, torch.device("cpu"))
    shipped = load_model(EN_DE)
    models = {"m": served_model("m", shipped, torch.device("cpu"))}
    with TestClient(create_app(models, attention_history=path)) as client:
        index = client.get("/v1/run/attention").json()
        maps = client.get("/v1/run/attention/50/1").json()
        missing_step = client.get("/v1/run/attention/49/0")
        missing_sentence = client.get("/v1/run/attention/50/2")
        reads_before_the_change = list(reads)
        path.write_bytes(b"damaged since the start")
        damaged = client.get("/v1/run/attention")
    assert reads_before_the_change == ["in a worker thread"]
    assert reads == ["in a worker thread"] * 2
    assert index == {
        "run": "my-run",
        "arch": "transformer",
        "maps": ["cross", "decoder_self", "encoder_self"],
        "sentences": [
            {
                "source": s.source,
                "reference": s.reference,
                "src_pieces": s.src_pieces,
                "tgt_pieces": s.tgt_pieces,
            }
            for s in sentences
        ],
        "steps": [1, 50],
    }
    expected = teacher_forced_maps(model, sentences[1].src_ids, sentences[1].tgt_ids, "cpu")
    for name, weights in expected.items():
        rounded = torch.round(weights.half().double(), decimals=3)
        assert maps["maps"][name] == rounded.tolist()
    assert (maps["step"], maps["sentence"]) == (50, 1)
    assert missing_step.status_code == 404
    assert missing_step.json() == {"error": "step 49: not in the run's history (steps: [1, 50])"}
    assert missing_sentence.json() == {"error": "sentence 2: the history has 2"}
    assert damaged.status_code == 500
    assert damaged.json()["error"] == (
        f"{FILE_NAME}: not an attention history of seq2seq (a header of 2,334,102,001,575,354,724 "
        "bytes in a file of 23)"
    )
    with TestClient(create_app(models)) as client:
        answer = client.get("/v1/run/attention")
    assert (answer.status_code, answer.json()) == (
        404,
        {"error": "no run: start the server with --run RUN_FOLDER"},
    )
