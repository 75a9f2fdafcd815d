"""Checkpoints are written atomically and loaded without running code from the file."""

import os
from pathlib import Path

import pytest
import torch

from seq2seq.checkpoints import CHECKPOINT_FORMAT, load_checkpoint
from seq2seq.errors import UserError
from seq2seq.training.checkpoint import copy_checkpoint, save_checkpoint


def minimal_checkpoint(value: float) -> dict:
    return {
        "format": CHECKPOINT_FORMAT,
        "config": {},
        "model": {"weight": torch.full((3,), value)},
        "tokenizers": {"joint": True, "src": torch.zeros(1, dtype=torch.uint8)},
    }


class Payload:
    """Unpickling this runs `os.system`: the classic malicious checkpoint."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "a.pt"
    save_checkpoint(minimal_checkpoint(1.5), path)
    assert torch.equal(load_checkpoint(path)["model"]["weight"], torch.full((3,), 1.5))
    copy_checkpoint(path, tmp_path / "b.pt")
    assert torch.equal(load_checkpoint(tmp_path / "b.pt")["model"]["weight"], torch.full((3,), 1.5))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pt", "b.pt"]  # no temp files left


def test_code_payload_is_refused_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    checkpoint = minimal_checkpoint(0.0)
    checkpoint["extra"] = Payload(marker)
    torch.save(checkpoint, path)
    with pytest.raises(UserError, match=r"evil\.pt: refused to load: .*could run code"):
        load_checkpoint(path)
    assert not marker.exists()


def test_truncated_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cut.pt"
    save_checkpoint(minimal_checkpoint(2.0), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match=r"cut\.pt: unreadable checkpoint, truncated or corrupt"):
        load_checkpoint(path)


def test_missing_and_foreign_files(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "nothing.pt")
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.ones(2)}, foreign)
    with pytest.raises(UserError, match="not a seq2seq checkpoint"):
        load_checkpoint(foreign)


def test_failing_save_keeps_the_previous_checkpoint(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "last.pt"
    save_checkpoint(minimal_checkpoint(1.0), path)

    def broken_save(obj, file) -> None:
        file.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(UserError, match=r"last.pt: cannot write the checkpoint \(disk full\); the"):
        save_checkpoint(minimal_checkpoint(9.0), path)
    monkeypatch.undo()
    assert torch.equal(load_checkpoint(path)["model"]["weight"], torch.full((3,), 1.0))
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]
