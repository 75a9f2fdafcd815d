"""The prepared token arrays: same batches as tokenising the text, read without mapping,
versioned;
and the data errors of prepare (vocabulary, empty valid split, Ctrl-C, configuration)."""

import json
import os
import pickle
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from commands import SEQ2SEQ, default_sigint

from seq2seq.checkpoints import tokenizer_entry
from seq2seq.config_file import load_config
from seq2seq.data.batching import ParallelDataset, TokenBatchSampler, collate, make_loader
from seq2seq.data.corpora import UserFiles
from seq2seq.data.prepare import prepare
from seq2seq.data.prepared_corpus import FileArray, PreparedData
from seq2seq.errors import UserError
from seq2seq.training import loop as train_module
from seq2seq.training.resume import check_same_tokens
from tests.reversal import DEFAULTS, tiny_overrides, write_reversal_corpus

ROOT = Path(__file__).resolve().parents[1]


def _files(folder: Path) -> UserFiles:
    return UserFiles.from_options("src", "tgt", str(folder), {})


@pytest.fixture(scope="module")
def reversal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("arrays")
    raw = write_reversal_corpus(root / "raw", {"train": 2000, "valid": 50, "test": 60})
    return prepare(
        "files",
        "src",
        "tgt",
        root / "prepared",
        vocab_size=32,
        byte_fallback=False,
        files=_files(raw),
    )


def _text_dataset(data: PreparedData, split: str) -> ParallelDataset:
    """The dataset as it was built before the arrays: the split's text through the tokenizers."""
    src_lines, tgt_lines = data.lines(split)
    return ParallelDataset.from_ids(
        data.src_tokenizer.encode(src_lines), data.tgt_tokenizer.encode(tgt_lines)
    )


@pytest.mark.parametrize(
    ("split", "shuffle", "replicas"), [("train", True, 2), ("valid", False, 1)]
)
def test_batches_from_the_arrays_equal_those_from_the_text(
    reversal: Path, split: str, shuffle: bool, replicas: int
) -> None:
    data = PreparedData.load(reversal)
    arrays, text = data.dataset(split), _text_dataset(data, split)
    assert isinstance(arrays._src, FileArray) and arrays._src.dtype == np.uint16
    assert np.array_equal(arrays.src_lens, text.src_lens)
    assert np.array_equal(arrays.tgt_lens, text.tgt_lens)
    for rank in range(replicas):
        samplers = [
            TokenBatchSampler(d.src_lens, d.tgt_lens, 100, shuffle, seed=3, num_replicas=replicas)
            for d in (arrays, text)
        ]
        for sampler in samplers:
            sampler.rank = rank
            sampler.set_epoch(1)
        pairs = list(zip(*samplers, strict=True))
        assert len(pairs) > 3
        for from_arrays, from_text in pairs:
            assert from_arrays == from_text
            left = collate([arrays[i] for i in from_arrays])
            right = collate([text[i] for i in from_text])
            for name in ("src", "src_lens", "tgt", "tgt_lens", "indices"):
                assert torch.equal(getattr(left, name), getattr(right, name))


def test_rows_are_read_without_mapping_the_files(reversal: Path) -> None:
    """Reading every row leaves no prepared file mapped in the process (a mapped corpus grows
    the process by the neighbouring cached pages of every row read), and a dataset pickled for
    a spawned DataLoader worker reads the same rows."""
    dataset = PreparedData.load(reversal).dataset("train")
    rows = [dataset[i] for i in range(len(dataset))]
    assert sum(len(row.src) for row in rows) == int(dataset.src_lens.sum())
    assert str(reversal) not in Path("/proc/self/maps").read_text()
    copy = pickle.loads(pickle.dumps(dataset))
    for i in (0, 1, len(dataset) - 1):
        assert np.array_equal(copy[i].src, rows[i].src)
        assert np.array_equal(copy[i].tgt, rows[i].tgt)


def test_dataloader_workers_read_the_same_batches(reversal: Path) -> None:
    dataset = PreparedData.load(reversal).dataset("train")
    sampler = TokenBatchSampler(dataset.src_lens, dataset.tgt_lens, 200, seed=5)
    in_process, in_workers = (list(make_loader(dataset, sampler, workers)) for workers in (0, 2))
    assert len(in_process) == len(in_workers) > 10
    for left, right in zip(in_process, in_workers, strict=True):
        assert torch.equal(left.src, right.src) and torch.equal(left.tgt, right.tgt)


def test_a_file_array_reads_slices_like_numpy(tmp_path: Path) -> None:
    values = np.arange(1000, dtype=np.int64) * 7
    values.tofile(tmp_path / "a.bin")
    array = FileArray(tmp_path / "a.bin", "int64")
    assert len(array) == 1000
    for key in (slice(0, 3), slice(998, 1002), slice(5, 5), slice(None), slice(10, 2)):
        assert np.array_equal(array[key], values[key])
    with open(tmp_path / "a.bin", "r+b") as f:  # a file cut short under a running process
        f.truncate(8 * 500)
    assert np.array_equal(array[0:500], values[:500])
    with pytest.raises(UserError, match=r"a\.bin: shorter than when it was opened; prepare it"):
        array[499:501]


def test_older_folders_are_refused_then_rebuilt(
    reversal: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = write_reversal_corpus(tmp_path / "raw", {"train": 200, "valid": 5, "test": 5})
    out = prepare(
        "files", "src", "tgt", tmp_path / "p", vocab_size=24, byte_fallback=False, files=_files(raw)
    )
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["format_version"] = 1
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(UserError, match=r"p: prepared by an older version .*rebuild it"):
        PreparedData.load(out)
    capsys.readouterr()
    prepare("files", "src", "tgt", out, vocab_size=24, byte_fallback=False, files=_files(raw))
    assert "prepared by an older version; rebuilding it" in capsys.readouterr().out
    assert len(PreparedData.load(out).dataset("valid")) == 5


def test_sentencepiece_sample_is_a_setting(tmp_path: Path) -> None:
    raw = write_reversal_corpus(tmp_path / "raw", {"train": 1500, "valid": 5, "test": 5})
    full = prepare(
        "files",
        "src",
        "tgt",
        tmp_path / "full",
        vocab_size=24,
        byte_fallback=False,
        files=_files(raw),
    )
    small = prepare(
        "files",
        "src",
        "tgt",
        tmp_path / "small",
        vocab_size=24,
        byte_fallback=False,
        files=_files(raw),
        spm_sample=1000,
    )
    manifests = [json.loads((p / "manifest.json").read_text()) for p in (full, small)]
    assert [m["tokenizer"]["sample"] for m in manifests] == [1_000_000, 1000]
    assert manifests[0]["files"]["spm.model"] != manifests[1]["files"]["spm.model"]


def test_check_vocabulary_names_the_setting(reversal: Path) -> None:
    data = PreparedData.load(reversal)
    data.check_vocabulary(32, True)
    with pytest.raises(UserError, match=r"data.vocab_size 5000: .* --vocab-size 32; set data"):
        data.check_vocabulary(5000, True)
    with pytest.raises(UserError, match=r"data.joint_vocab false: .* a joint vocabulary"):
        data.check_vocabulary(32, False)


def _script(name: str, args: list[str], cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [*SEQ2SEQ, name, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )


def _children(pid: int) -> list[int]:
    """The process ids of `pid`'s children (Linux)."""
    tasks = Path(f"/proc/{pid}/task")
    files = list(tasks.glob("*/children")) if tasks.is_dir() else []
    return [int(child) for file in files for child in file.read_text().split()]


def _one_error_line(process: subprocess.Popen[str]) -> str:
    _, stderr = process.communicate(timeout=120)
    lines = stderr.strip().splitlines()
    assert process.returncode == 2, stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


@pytest.mark.slow  # starts a Python that imports torch
def test_config_vocabulary_other_than_the_folders(reversal: Path, tmp_path: Path) -> None:
    overrides = [f'data.prepared="{reversal}"', "data.vocab_size=5000"]
    overrides.append(f'train.run_dir="{tmp_path / "run"}"')
    line = _one_error_line(_script("train", ["--config", str(DEFAULTS), *overrides], tmp_path))
    assert "data.vocab_size 5000" in line and "--vocab-size 32" in line
    assert os.listdir(tmp_path) == []


def _corpus_args(folder: Path) -> list[str]:
    return ["--corpus", "files", "--src", "src", "--tgt", "tgt", "--data-dir", str(folder)]


def test_vocabulary_larger_than_the_corpus_gives_says_the_maximum(tmp_path: Path) -> None:
    raw = write_reversal_corpus(tmp_path / "raw", {"train": 200, "valid": 5, "test": 5})
    args = [*_corpus_args(raw), "--vocab-size", "5000", "--no-byte-fallback", "--out", "data/out"]
    line = _one_error_line(_script("prepare", args, tmp_path))
    assert "--vocab-size 5000: the training text yields at most" in line
    maximum = int(line.split("at most ")[1].split()[0])
    assert 20 < maximum < 40 and f"give --vocab-size {maximum} or less" in line
    assert sorted(os.listdir(tmp_path)) == ["raw"]  # no data/ left behind


def test_empty_valid_split_is_refused_at_prepare(tmp_path: Path) -> None:
    raw = write_reversal_corpus(tmp_path / "raw", {"train": 200, "valid": 5, "test": 5})
    for side in ("src", "tgt"):
        (raw / f"valid.{side}").write_text("")
    args = [*_corpus_args(raw), "--vocab-size", "24", "--no-byte-fallback", "--out", "data/out"]
    line = _one_error_line(_script("prepare", args, tmp_path))
    assert "the valid split is empty" in line
    assert sorted(os.listdir(tmp_path)) == ["raw"]


@pytest.mark.slow  # trains sentencepiece on a whole corpus
def test_ctrl_c_while_sentencepiece_trains_stops_at_once(shared_data: Path, tmp_path: Path) -> None:
    args = ["--corpus", "tatoeba", "--src", "en", "--tgt", "fr", "--mirror", str(shared_data)]
    process = _script("prepare", [*args, "--out", "data/out"], tmp_path)
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("training sentencepiece"):
            break
    while not _children(process.pid):  # sentencepiece trains in a child process
        time.sleep(0.05)
    assert process.poll() is None
    process.send_signal(signal.SIGINT)
    started = time.perf_counter()
    process.wait(timeout=60)
    # Tatoeba's sentencepiece trains for 8 s or more on 2 idle cores (longer under load, as
    # the stop is): waiting for it would take longer than this bound, which leaves room for load
    assert time.perf_counter() - started < 5
    assert process.returncode == 130
    assert os.listdir(tmp_path) == []  # no partial folder, no empty data/


def _damaged_copy(reversal: Path, folder: Path, keep_sizes: bool = False) -> Path:
    """A copy of the prepared folder; without the recorded sizes unless `keep_sizes` (as a
    folder prepared before they were recorded), so the array checks themselves are reached."""
    shutil.copytree(reversal, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    if not keep_sizes:
        del manifest["sizes"]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("cut offsets", r"valid\.tgt\.offsets: holds 49 lines, but the split has 50; the prepared"),
        ("cut ids", r"valid\.src\.ids: \d+ token ids, but the offsets end at \d+; the prepared"),
        ("odd ids", r"valid\.src\.ids: cut off in the middle of a number"),
        ("unordered offsets", r"valid\.src\.offsets: offsets out of order"),
        ("id over vocabulary", r"valid\.tgt\.ids: token id 40 is outside the vocabulary of 32"),
    ],
)
def test_damaged_arrays_are_named_before_use(
    reversal: Path, tmp_path: Path, damage: str, message: str
) -> None:
    folder = _damaged_copy(reversal, tmp_path / "p")
    ids, offsets = folder / "valid.src.ids", folder / "valid.src.offsets"
    if damage == "cut offsets":
        path = folder / "valid.tgt.offsets"
        path.write_bytes(path.read_bytes()[:-8])
    elif damage == "cut ids":
        ids.write_bytes(ids.read_bytes()[:-2])
    elif damage == "odd ids":
        ids.write_bytes(ids.read_bytes()[:-1])
    elif damage == "unordered offsets":
        values = np.fromfile(offsets, dtype=np.int64)
        values[[3, 4]] = values[[4, 3]]
        values.tofile(offsets)
    else:
        values = np.fromfile(folder / "valid.tgt.ids", dtype=np.uint16)
        values[7] = 40
        values.tofile(folder / "valid.tgt.ids")
    data = PreparedData.load(folder)
    with pytest.raises(UserError, match=message + ".*rebuild it with seq2seq prepare"):
        data.dataset("valid")
    data.dataset("train")  # the other splits stay usable


def test_sizes_are_checked_at_load_and_checksums_on_request(reversal: Path, tmp_path: Path):
    folder = _damaged_copy(reversal, tmp_path / "p", keep_sizes=True)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["test.src"] = "0" * 64  # an edited checksum: the files are intact
    (folder / "manifest.json").write_text(json.dumps(manifest))
    data = PreparedData.load(folder)
    with pytest.raises(UserError, match=r"p/test\.src: its SHA256 differs from the one in"):
        data.verify()
    text = folder / "valid.src"
    text.write_text(text.read_text()[:-3])
    with pytest.raises(UserError, match=r"p/valid\.src: \d+ bytes, but \d+ when it was prepared"):
        PreparedData.load(folder)


def test_a_run_resumes_only_on_the_tokens_it_started_with(reversal: Path, tmp_path: Path) -> None:
    """A folder prepared again with other tokenization options gives other token ids: resuming
    a run on it is refused in one line that names the folder's options."""
    data = PreparedData.load(reversal)
    checkpoint = {"tokenizers": tokenizer_entry(data.src_tokenizer, data.tgt_tokenizer)}
    check_same_tokens(checkpoint, data, tmp_path / "last.pt")
    raw = write_reversal_corpus(tmp_path / "raw", {"train": 3000, "valid": 100, "test": 200})
    options = {"vocab_size": 32, "byte_fallback": False, "split_digits": False}
    again = prepare("files", "src", "tgt", tmp_path / "again", files=_files(raw), **options)
    with pytest.raises(UserError) as error:
        check_same_tokens(checkpoint, PreparedData.load(again), tmp_path / "last.pt")
    assert str(error.value) == (
        f"{tmp_path / 'last.pt'}: this run was trained on other tokens than {again} now holds "
        "(it was prepared again, now with --vocab-size 32 --no-split-digits --no-byte-fallback); "
        "resume on the folder the run started with, or start a new run with another "
        "train.run_name"
    )


@pytest.mark.slow  # trains for seconds
def test_resuming_after_the_folder_was_prepared_again_is_refused(tmp_path: Path) -> None:
    raw = write_reversal_corpus(tmp_path / "raw", {"train": 300, "valid": 5, "test": 5})
    options = {"vocab_size": 32, "byte_fallback": False, "files": _files(raw)}
    folder = prepare("files", "src", "tgt", tmp_path / "prepared", **options)
    overrides = [*tiny_overrides("gru", folder, tmp_path / "run"), "train.attention_samples=0"]
    train_module.train(load_config(None, [*overrides, "train.max_steps=2"]))
    prepare("files", "src", "tgt", folder, split_digits=False, **options)
    with pytest.raises(UserError, match=r"last\.pt: this run was trained on other tokens than "):
        train_module.train(load_config(None, [*overrides, "train.max_steps=4"]))
