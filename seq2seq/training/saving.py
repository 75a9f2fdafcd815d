"""Validating and saving a run while it trains: when the loop validates or saves (`Saves`),
validating on rank 0 with the checkpoints it writes, and what a training checkpoint holds."""

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import torch
from tqdm import tqdm

from seq2seq.checkpoints import CHECKPOINT_FORMAT, tokenizer_entry
from seq2seq.config import Config
from seq2seq.training import distributed
from seq2seq.training.checkpoint import save_checkpoint, save_validated
from seq2seq.training.reproducibility import rng_state
from seq2seq.training.run import Progress, Run, TrainingDiverged
from seq2seq.training.run_log import RunLog
from seq2seq.training.signals import StopSignals
from seq2seq.training.validation import validate


def validate_and_save(run: Run, progress: Progress, log: RunLog) -> None:
    """Validate on rank 0, update the best score, the plateau schedule and early stopping,
    share the outcome with every rank, then write step-N.pt / best.pt / last.pt."""
    cfg, env = run.cfg, run.env
    if env.is_main:
        metrics = validate(run, log, progress.step)
        record_validation(cfg, progress, metrics)
        if isinstance(run.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            run.scheduler.step(metrics["valid/bleu"])
        if progress.stopped_early:
            log.line(f"early stop: no BLEU improvement in {cfg.train.patience} validations")
    shared = distributed.broadcast_object((asdict(progress), run.scheduler.state_dict()), env)
    progress_fields, scheduler_state = shared
    for name, value in progress_fields.items():
        setattr(progress, name, value)
    run.scheduler.load_state_dict(scheduler_state)
    states = distributed.gather_objects(rng_state(), env)
    if env.is_main:
        check_weights_finite(run.raw_model, progress.step)
        checkpoint = training_checkpoint(run, progress, states)
        is_best = progress.best_step == progress.step
        save_validated(checkpoint, run.run_dir, is_best, cfg.train.keep_last)
        log.flush()


def record_validation(cfg: Config, progress: Progress, metrics: dict[str, float]) -> None:
    """Add a validation's metrics to `progress`: history, best score, early stopping."""
    progress.history.append({"step": progress.step, **metrics})
    if metrics["valid/bleu"] > progress.best_bleu:
        progress.best_bleu, progress.best_step = metrics["valid/bleu"], progress.step
        progress.validations_without_improvement = 0
    else:
        progress.validations_without_improvement += 1
    patience = cfg.train.patience
    progress.stopped_early = bool(patience and progress.validations_without_improvement >= patience)


class Saves:
    """When the loop validates (every `valid_every` steps, every `valid_every_minutes` and at
    max_steps, writing its checkpoints) and when it only writes last.pt (every `save_every`
    steps, every `save_every_minutes`, and at a stop signal, so that the run resumes where it
    stopped). Minutes are read on `clock` (seconds), from the start of the loop."""

    def __init__(
        self, run: Run, signals: StopSignals, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.run, self.signals, self.clock = run, signals, clock
        self.last_save = self.last_validation = clock()

    def due(self, progress: Progress) -> tuple[bool, bool, bool]:
        """(validate, save last.pt only, stop) after the update that made `progress.step`,
        agreed by every rank."""
        train, now = self.run.cfg.train, self.clock()
        save_due = bool(train.save_every and progress.step % train.save_every == 0)
        minutes = train.save_every_minutes
        save_due = save_due or bool(minutes and now - self.last_save >= minutes * 60)
        minutes = train.valid_every_minutes
        validate_due = bool(minutes and now - self.last_validation >= minutes * 60)
        stop_signal, save_due, validate_due = distributed.any_rank(
            [self.signals.received, save_due, validate_due], self.run.env, self.run.device
        )
        validate = validate_due or progress.step % train.valid_every == 0
        validate = validate or bool(train.max_steps and progress.step >= train.max_steps)
        return validate, not validate and (save_due or stop_signal), stop_signal

    def save(self, progress: Progress, log: RunLog, validate: bool) -> None:
        if validate:
            validate_and_save(self.run, progress, log)
        else:
            save_last(self.run, progress)
        self.last_save = self.clock()
        if validate:
            self.last_validation = self.last_save

    def next_validation(self, progress: Progress, steps_per_second: float | None) -> str:
        """When the next validation comes, as the bar says it: `in N steps (m:ss)` at
        `steps_per_second` (None: not known yet), or `in m:ss` when valid_every_minutes brings
        it sooner."""
        train = self.run.cfg.train
        steps = train.valid_every - progress.step % train.valid_every
        by_steps = steps / steps_per_second if steps_per_second else None
        if train.valid_every_minutes:
            waited = self.clock() - self.last_validation
            by_time = max(train.valid_every_minutes * 60 - waited, 0.0)
            if by_steps is None or by_time < by_steps:
                return f"in {tqdm.format_interval(by_time)}"
        shown = f"in {steps} steps"
        return shown if by_steps is None else f"{shown} ({tqdm.format_interval(by_steps)})"


def training_checkpoint(run: Run, progress: Progress, rng_states: list[dict]) -> dict[str, Any]:
    return {
        "format": CHECKPOINT_FORMAT,
        "config": run.cfg.to_dict(),
        "model": run.raw_model.state_dict(),
        "tokenizers": tokenizer_entry(run.data.src_tokenizer, run.data.tgt_tokenizer),
        "step": progress.step,
        "training": {
            "optimizer": run.optimizer.state_dict(),
            "scheduler": run.scheduler.state_dict(),
            "scaler": run.scaler.state_dict(),
            "progress": asdict(progress),
            "rng": rng_states,  # one entry per rank
        },
    }


def save_last(run: Run, progress: Progress) -> None:
    """Write last.pt (rank 0), with every rank's random generators."""
    states = distributed.gather_objects(rng_state(), run.env)
    if run.env.is_main:
        check_weights_finite(run.raw_model, progress.step)
        save_checkpoint(training_checkpoint(run, progress, states), run.last_path)


def check_weights_finite(model: torch.nn.Module, step: int) -> None:
    if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
        raise TrainingDiverged(f"step {step}: weights are not finite; not saving")
