"""seq2seq prepare on bad input: exit 2, one `error:` line, nothing left behind."""

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from commands import SEQ2SEQ

from seq2seq.data.download import MIRROR_ENV


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != MIRROR_ENV}
    return subprocess.run(
        [*SEQ2SEQ, "prepare", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _assert_user_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _user_files(corpus: Path) -> list[str]:
    return ["--corpus", "files", "--src", "en", "--tgt", "de", "--data-dir", str(corpus)]


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--corpus", "nope"], ["--corpus nope: unknown corpus; known: multi30k, tatoeba, files"]),
        (["--src", "en", "--tgt", "xx"], ["--tgt xx", "(it has en, de, fr, cs)"]),
        (["--corpus", "tatoeba", "--src", "de", "--tgt", "en"], ["--src de"]),
        (["--src", "de", "--tgt", "de"], ["--src and --tgt are both 'de'"]),
        (["--vocab-size", "0"], ["--vocab-size 0: must be between 16 and"]),
        (
            ["--vocab-size", "100"],
            ["--vocab-size 100: byte fallback takes 256 pieces", "261 or more, or --no-byte-"],
        ),
        (["--model-type", "word"], ["--model-type word"]),
        (["--spm-sample", "100"], ["--spm-sample 100: must be >= 1000"]),
        (["--train-tsv", "x.tsv"], ["need --corpus files"]),
        (["--corpus", "files"], ["--corpus files needs its files"]),
        (
            ["--corpus", "files", "--train-src", "missing.en", "--train-tgt", "missing.de"],
            ["missing.en: no such file"],
        ),
    ],
)
def test_bad_options(tmp_path: Path, args: list[str], fragments: list[str]) -> None:
    result = _run([*args, "--out", "out"], cwd=tmp_path)
    _assert_user_error(result, *fragments)
    assert os.listdir(tmp_path) == []


def test_mismatched_line_counts(small_corpus: Path, tmp_path: Path) -> None:
    (small_corpus / "test.de").write_text("only one line\n")
    result = _run([*_user_files(small_corpus), "--out", "data/out"], cwd=tmp_path)
    _assert_user_error(result, "test.en has 10 lines but", "test.de has 1")
    assert not (tmp_path / "data").exists()  # nothing left behind


def test_bad_tsv_line(tmp_path: Path) -> None:
    (tmp_path / "train.tsv").write_text("a\tb\nno tab here\n")
    args = ["--corpus", "files", "--train-tsv", "train.tsv", "--valid-tsv", "train.tsv"]
    result = _run([*args, "--test-tsv", "train.tsv"], cwd=tmp_path)
    _assert_user_error(result, "train.tsv:2: expected 2 tab-separated columns")


def test_vocabulary_too_small_leaves_the_existing_folder(
    small_corpus: Path, tmp_path: Path
) -> None:
    args = [*_user_files(small_corpus), "--no-byte-fallback", "--out", "data/out"]
    assert _run([*args, "--vocab-size", "47"], cwd=tmp_path).returncode == 0
    before = _snapshot(tmp_path / "data" / "out")
    result = _run([*args, "--vocab-size", "20"], cwd=tmp_path)
    _assert_user_error(result, "--vocab-size 20 is too small")
    assert _snapshot(tmp_path / "data" / "out") == before
    assert os.listdir(tmp_path / "data") == ["out"]


def test_bad_checksum_in_mirror(shared_data: Path, tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    shutil.copytree(shared_data / "multi30k", mirror / "multi30k")
    (mirror / "multi30k" / "val.de.gz").write_bytes(b"damaged")
    result = _run(["--mirror", str(mirror), "--out", "data/out"], cwd=tmp_path)
    _assert_user_error(result, "val.de.gz: SHA256 mismatch: expected f0cba2f9", "got ")
    assert not (tmp_path / "data").exists()  # nothing left behind

    (mirror / "multi30k" / "val.de.gz").unlink()
    result = _run(["--mirror", str(mirror), "--out", "data/out"], cwd=tmp_path)
    _assert_user_error(result, f"mirror {mirror}: missing multi30k/val.de.gz")
    assert not (tmp_path / "data").exists()  # nothing left behind


@pytest.mark.slow  # prepares a whole corpus
def test_prepare_through_an_http_mirror(
    shared_data: Path, tmp_path: Path, http_server: Callable[[Path], str]
) -> None:
    url = http_server(shared_data)
    args = ["--mirror", url, "--model-type", "bpe", "--out", "data/multi30k.en-de"]
    result = _run(args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "prepared data/multi30k.en-de" in result.stdout
    assert "train 29000, valid 1014, test 1000 pairs" in result.stdout
    downloads = tmp_path / "data" / "downloads" / "multi30k"
    assert sorted(os.listdir(downloads)) == sorted(
        f"{prefix}.{lang}.gz"
        for prefix in ("train", "val", "test_2016_flickr")
        for lang in ("en", "de")
    )


def test_bad_utf8_names_its_line(small_corpus: Path, tmp_path: Path) -> None:
    lines = (small_corpus / "train.de").read_bytes().split(b"\n")
    lines[6] = b"zw\xc3ei"
    (small_corpus / "train.de").write_bytes(b"\n".join(lines))
    result = _run([*_user_files(small_corpus), "--out", "data/out"], cwd=tmp_path)
    _assert_user_error(result, "train.de:7: not UTF-8 text (bad byte at byte 3 of the line)")
    assert not (tmp_path / "data").exists()
