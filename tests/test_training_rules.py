"""The rules around a training run, checked without training: what a resume may change."""

from pathlib import Path

import pytest

from seq2seq.config import load_config
from seq2seq.errors import UserError
from seq2seq.training.run import check_resumable

SAVED = load_config(None, ["train.max_steps=30000", "train.warmup_steps=2000", "train.lr=0.005"])


def test_a_resume_may_change_when_the_run_stops_validates_and_saves() -> None:
    cfg = load_config(None, ["train.max_steps=8000", "train.warmup_steps=2000", "train.lr=0.005"])
    cfg.train.valid_every, cfg.train.num_workers = 500, 2
    assert check_resumable(SAVED, cfg, Path("run/last.pt")) == [
        "train.max_steps=8000 (saved: 30000)",
        "train.valid_every=500 (saved: 1000)",
        "train.num_workers=2 (saved: 0)",
    ]
    assert check_resumable(SAVED, SAVED, Path("run/last.pt")) == []


def test_a_resume_that_changes_the_training_is_refused_naming_every_key() -> None:
    cfg = load_config(None, ["train.max_steps=8000", "train.warmup_steps=1000", "train.lr=0.001"])
    cfg.model.dropout, cfg.decode.valid_beam_size = 0.2, 5
    with pytest.raises(UserError) as refused:
        check_resumable(SAVED, cfg, Path("run/last.pt"))
    assert str(refused.value) == (
        "run/last.pt: this run was saved with other values of keys that change its training: "
        "model.dropout=0.2 (saved: 0.3), train.lr=0.001 (saved: 0.005), "
        "train.warmup_steps=1000 (saved: 2000), decode.valid_beam_size=5 (saved: 1); resume it "
        "without these changes, or start a new run with another train.run_name "
        "(or train.run_dir)"
    )
