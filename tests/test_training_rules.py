"""The rules around a training run, checked without training: what a resume may change, the note
about an untrained checkpoint in `seq2seq translate`, the progress bar's total, the torchrun refusal
and which checkpoints may be averaged."""

import argparse
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from seq2seq.checkpoints import CHECKPOINT_FORMAT
from seq2seq.commands import average as average_command
from seq2seq.commands import train as train_command
from seq2seq.commands import translate as translate_command
from seq2seq.config_file import dump_toml, load_config
from seq2seq.decoding.line_translator import Translation
from seq2seq.errors import UserError
from seq2seq.training import distributed, loop
from seq2seq.training.checkpoint import average_checkpoints, save_checkpoint
from seq2seq.training.progress_report import planned_last_step
from seq2seq.training.resume import check_resumable
from seq2seq.training.run import Progress

CONFIG = ["--config", str(Path(__file__).parents[1] / "configs/transformer.multi30k.en-de.toml")]
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


@pytest.mark.parametrize(
    ("overrides", "progress", "last_step"),
    [
        (["train.max_steps=8000"], Progress(), 8000),  # 100 epochs of 100 updates: 10,000
        (["train.max_steps=0"], Progress(), 10000),
        (["train.max_steps=0", "train.accum_steps=3"], Progress(), 100 * 34),
        # Resumed in epoch 99 after 40 of its 100 batches: 60 updates left.
        (["train.max_steps=0"], Progress(step=9940, epoch=99, position=40), 10000),
        (["train.max_steps=8000", "train.patience=10"], Progress(), None),
    ],
)
def test_the_bar_counts_to_the_step_the_run_ends_at(
    overrides: list[str], progress: Progress, last_step: int | None
) -> None:
    cfg = load_config(None, ["train.max_epochs=100", *overrides])
    assert planned_last_step(cfg, progress, batches_per_epoch=100) == last_step


def test_torchrun_with_more_processes_than_gpus_is_refused_before_joining(monkeypatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(distributed.dist, "init_process_group", pytest.fail)  # never reached
    with pytest.raises(UserError, match=r"^torchrun --nproc_per_node=4: this node has 1 GPU"):
        distributed.init_distributed("cuda")


def test_only_rank_0_prints_why_a_torchrun_run_stops(monkeypatch, capsys) -> None:
    def refuse(*args, **kwargs) -> None:
        raise UserError("data.prepared: missing")

    monkeypatch.setattr(loop, "train", refuse)
    monkeypatch.setattr(train_command, "QUIET_RANK_PAUSE_S", 0.0)
    monkeypatch.setenv("RANK", "1")
    for argv in (CONFIG, [], ["--bogus"]):  # refused by train, --config missing, not an option
        with pytest.raises(SystemExit) as exited:
            train_command.main(argv)
        assert exited.value.code == 2 and capsys.readouterr().err == ""
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(UserError, match=r"data\.prepared: missing"):  # run_cli prints it
        train_command.main(CONFIG)


def fake_checkpoint(path: Path, step: int, **model: object) -> Path:
    """A checkpoint file with one weight, the configuration with `model` changes, and the
    tokenizer entry averaging compares (not real sentencepiece models)."""
    cfg = load_config(None, [f"model.{key}={value}" for key, value in model.items()])
    pieces = torch.tensor([1, 2, 3], dtype=torch.uint8)
    checkpoint = {
        "format": CHECKPOINT_FORMAT,
        "config": cfg.to_dict(),
        "model": {"weight": torch.full((2,), float(step))},
        "tokenizers": {"joint": True, "src": pieces, "tgt": pieces},
        "step": step,
    }
    save_checkpoint(checkpoint, path)
    return path


def test_averaging_refuses_checkpoints_of_different_models(tmp_path: Path) -> None:
    first = fake_checkpoint(tmp_path / "step-1.pt", 1)
    same = fake_checkpoint(tmp_path / "step-2.pt", 3)
    assert average_checkpoints([first, same])["model"]["weight"].tolist() == [2.0, 2.0]
    plain = fake_checkpoint(tmp_path / "plain.pt", 2, fast="false")  # the same weights
    assert average_checkpoints([first, plain])["model"]["weight"].tolist() == [1.5, 1.5]
    other = fake_checkpoint(tmp_path / "other.pt", 3, dropout=0.1, ffn_size=512)
    with pytest.raises(UserError) as refused:
        average_checkpoints([first, same, other])
    assert str(refused.value) == (
        f"{other}: not the same model as {first} (model.ffn_size=512 (not 256), "
        "model.dropout=0.1 (not 0.3)); only checkpoints of one model, e.g. of one run, can be "
        "averaged"
    )


@pytest.mark.parametrize(
    ("keep_last", "found", "why"),
    [
        (0, 0, "the run keeps none (train.keep_last=0 in its config.toml); train with "
         "train.keep_last=5 to keep them"),
        (2, 2, "the run keeps the checkpoints of its last 2 validations (train.keep_last=2 in "
         "its config.toml); average those with --last 2"),
        (10, 3, "the run keeps those of its last 10 validations (train.keep_last=10 in its "
         "config.toml), one every 500 steps, and has written 3 so far; average those with "
         "--last 3"),
    ],
)  # fmt: skip
def test_too_few_step_checkpoints_say_why_from_the_run_config(
    tmp_path: Path, keep_last: int, found: int, why: str
) -> None:
    cfg = load_config(None, [f"train.keep_last={keep_last}", "train.valid_every=500"])
    (tmp_path / "config.toml").write_text(dump_toml(cfg.to_dict()), encoding="utf-8")
    for step in range(found):
        (tmp_path / f"step-{(step + 1) * 500}.pt").write_bytes(b"")
    with pytest.raises(UserError) as refused:
        average_command.last_step_checkpoints(tmp_path, 5)
    assert str(refused.value) == f"--last 5: {tmp_path} has {found} step-<N>.pt checkpoints: {why}"


class EmptyTranslator:
    """Translates every line to nothing, as a model saved before any training may."""

    decode_cfg = SimpleNamespace(beam_size=1)

    def source_limit(self, beam_size: int) -> int:
        return 256

    def translate(self, lines: list[str], **kwargs: object) -> list[list[Translation]]:
        return [[Translation("", 0.0, [], [], [])] for _ in lines]


@pytest.mark.parametrize(("step", "noted"), [(3, True), (1000, False)])
def test_an_empty_translation_of_an_untrained_checkpoint_is_noted_once(
    step: int, noted: bool, capsys
) -> None:
    args = argparse.Namespace(
        model=None,
        checkpoint="run/last.pt",
        nbest=1,
        show_attention=False,
        save_attention=None,
        split_sentences=True,
        format="text",
    )
    inference = SimpleNamespace(step=step, config=load_config(None, ["train.valid_every=1000"]))
    note = translate_command.untrained_note(args, inference)
    lines = ["a b c", "", "d e"]
    translate_command.batch_mode(EmptyTranslator(), args, lines, "standard input", note)
    out, err = capsys.readouterr()
    assert out == "\n\n\n"  # the translations, unchanged
    expected = (
        f"note: run/last.pt was saved at step {step} (its run validates every 1000 steps): the "
        "model is not trained yet, and its translations can be empty\n"
    )
    assert err == (expected if noted else "")
