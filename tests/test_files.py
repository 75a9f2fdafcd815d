"""The one strict reader of text (corpora, --src/--ref/--input files, standard input)."""

import gzip
import io
from pathlib import Path

import pytest

from seq2seq.errors import UserError
from seq2seq.files import read_lines, text_lines

TEXT = b"\xef\xbb\xbfA dog\rruns.\r\nThe cat.\n\nlast\xe2\x80\xa8line"
LINES = ["A dog\rruns.", "The cat.", "", "last\u2028line"]


def test_only_line_feeds_end_lines() -> None:
    """A BOM and the CR of a CRLF go; a bare CR and U+2028 stay inside their line."""
    assert list(text_lines(io.BytesIO(TEXT), "x")) == LINES


@pytest.mark.parametrize("name", ["in.txt", "in.txt.gz"])
def test_plain_and_gzip_files_read_alike(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(gzip.compress(TEXT) if name.endswith(".gz") else TEXT)
    assert read_lines(path) == LINES


def test_bad_bytes_name_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"ok\nnot \xc3(\n")
    with pytest.raises(UserError) as by_path:
        read_lines(path)
    assert str(by_path.value) == f"{path}:2: not UTF-8 text (bad byte at byte 5 of the line)"
    with pytest.raises(UserError) as by_option:
        read_lines(path, "--src in.txt")
    assert str(by_option.value).startswith("--src in.txt:2: not UTF-8 text")


def test_a_damaged_gzip_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "in.txt.gz"
    path.write_bytes(gzip.compress(b"a\nb\n")[:-6])
    with pytest.raises(UserError, match=r"^--ref .*in\.txt\.gz: not a valid gzip file"):
        read_lines(path, f"--ref {path}")
