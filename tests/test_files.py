"""The one strict reader of text (corpora, --src/--ref/--input files, standard input), and
folders replaced so that a kill, a full disk or a stale leftover damages nothing."""

import errno
import gzip
import io
import os
import subprocess
from pathlib import Path

import pytest
import safetensors.torch
from reversal import prepare_reversal

from seq2seq.decoding.export import check_export_target, export_model
from seq2seq.decoding.model_folder import find_model
from seq2seq.decoding.model_result import SHIPPED_MODELS
from seq2seq.decoding.open_pytorch import Inference, load_model
from seq2seq.errors import UserError
from seq2seq.files import (
    read_lines,
    recover_folder,
    replace_folder,
    staging_folder,
    text_lines,
)

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


# --- Replacing a folder: a kill between the renames, stale staging folders -----------------------


def dead_pid() -> int:
    """The pid of a process that has ended."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_replacement_split_by_a_kill_is_recovered(tmp_path: Path) -> None:
    target = tmp_path / "model"
    old = tmp_path / ".model.old"
    old.mkdir()
    (old / "weights").write_text("old")  # a kill after the first rename: target is missing
    stale = tmp_path / f".model.export-{dead_pid()}-x1"
    stale.mkdir()
    running = tmp_path / f".model.export-{os.getpid()}-x2"
    running.mkdir()
    assert recover_folder(target, "export") == [
        f"{target}: restored from .model.old, left by an interrupted replacement",
        f"{target}: deleted {stale.name}, left by an interrupted build",
    ]
    assert (target / "weights").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [running.name, "model"]

    old.mkdir()  # a kill after the second rename: the old folder is stale
    assert recover_folder(target, "export") == [
        f"{target}: deleted .model.old, left by an interrupted replacement"
    ]
    new = staging_folder(target, "export")
    (new / "weights").write_text("new")
    replace_folder(new, target)
    assert (target / "weights").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == [running.name, "model"]


def exported_inference() -> Inference:
    return load_model(SHIPPED_MODELS / "gru-small.multi30k.en-de")


def test_export_force_over_a_stale_old_folder(tmp_path: Path) -> None:
    inference = exported_inference()
    out = tmp_path / "exported"
    export_model(inference, out)
    (tmp_path / ".exported.old").mkdir()
    (tmp_path / ".exported.old" / "leftover").write_text("x")
    check_export_target(out, force=True)
    export_model(inference, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exported"]

    out.rename(tmp_path / ".exported.old")  # killed between the renames of export --force
    with pytest.raises(UserError, match=r"missing; an interrupted export left the model in "):
        find_model(str(out))
    with pytest.raises(UserError, match="holds an exported model already; pass --force"):
        check_export_target(out, force=False)  # recovered first, so nothing is replaced
    assert (out / "model.safetensors").is_file()


def test_export_onto_a_full_disk_is_one_line_and_replaces_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inference = exported_inference()
    out = tmp_path / "exported"
    export_model(inference, out)
    before = (out / "model.safetensors").read_bytes()

    def full_disk(*args: object, **kwargs: object) -> None:  # what safetensors 0.8 raises there
        message = f"I/O error: {os.strerror(errno.ENOSPC)} (os error {errno.ENOSPC})"
        raise safetensors.SafetensorError(f"Error while serializing: {message}")

    monkeypatch.setattr(safetensors.torch, "save_model", full_disk)
    with pytest.raises(UserError) as caught:
        export_model(inference, out)
    assert str(caught.value) == (
        f"{out}: cannot write the exported model (No space left on device); nothing replaced"
    )
    assert (out / "model.safetensors").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exported"]


def test_prepare_recovers_a_rebuild_split_by_a_kill(
    reversal: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = reversal.parent
    reversal.rename(folder / f".{reversal.name}.old")  # killed between the renames
    building = folder / f".{reversal.name}.building-{dead_pid()}-abc"
    building.mkdir()
    capsys.readouterr()
    assert prepare_reversal(folder) == reversal
    printed = capsys.readouterr().out
    assert f"{reversal}: restored from .{reversal.name}.old" in printed
    assert f"{reversal}: deleted {building.name}" in printed
    assert "already prepared with these settings" in printed  # reused, not rebuilt
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == []
