"""Training, read top to bottom.

    prepared corpus -> token-budget batches (shuffled per epoch)
    for each group of `accum_steps` batches:
        loss = label-smoothed cross-entropy of the teacher-forced logits, per target token
        backward, clip the gradient norm, AdamW step, learning-rate schedule
        every `log_every` steps or `log_every_seconds`: the losses the steps left on the
            device, read at once, to train.log and TensorBoard (no step waits for a GPU:
            `Update`, `Window`)
        every `valid_every` steps or `valid_every_minutes`: valid loss and perplexity, BLEU and
            chrF of real decoding, attention maps and sample translations to TensorBoard, the
            attention history, step-N.pt / best.pt / last.pt
        every `save_every_minutes`: last.pt

A run folder holds everything: config.toml, train.log, TensorBoard events, checkpoints, and
train.lock, which one process at a time holds while it trains (seq2seq/training/run_lock.py).
Starting the same command again resumes from last.pt exactly: weights, optimizer, schedule, step,
epoch, the position inside the epoch and every random generator come back as they were saved.
Ctrl-C or SIGTERM ends the current update, saves last.pt and exits with 130 or 143.

The GPU speed recipe's keys act in `training_batches` (train.length_buckets, data_on_device),
`train_update` (fused_optimizer: skipping a non-finite update on the device), `set_up` in
seq2seq/training/run.py (compile, fused_optimizer) and `validation_translator` in
seq2seq/training/validation.py (valid_batch_tokens).
"""

import math
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from seq2seq.config import Config
from seq2seq.config_file import dump_toml
from seq2seq.data.batching import (
    Batch,
    BucketCollate,
    DeviceCorpus,
    Example,
    TokenBatchSampler,
    bucket_lengths,
    collate,
    make_loader,
)
from seq2seq.device import cpu_has_fast_bf16, pick_device
from seq2seq.errors import UserError
from seq2seq.files import remove_temporary_files
from seq2seq.training import distributed
from seq2seq.training.checkpoint import save_validated
from seq2seq.training.loss import token_losses
from seq2seq.training.reproducibility import rng_state
from seq2seq.training.run import (
    Progress,
    Run,
    TrainingDiverged,
    check_weights_finite,
    finished_reason,
    resume,
    run_dir_of,
    save_last,
    set_up,
    training_checkpoint,
)
from seq2seq.training.run_lock import RunFolderLock
from seq2seq.training.run_log import RunLog
from seq2seq.training.signals import StopSignals
from seq2seq.training.validation import log_first_attention, validate

CPU_ESTIMATE_AFTER = 20  # updates timed before a CPU run says when its first validation comes
HINT_AFTER_MINUTES = 10  # a first validation further away than this names train.valid_every_minutes


class Update(NamedTuple):
    """One optimizer update. Its figures stay on the device that computed them until a log line
    reads them all at once (`Window.settle`): reading a GPU tensor makes the host wait for the
    GPU, and a wait in every step leaves the GPU idle while the host prepares the next one."""

    step: int  # the step number the update takes
    means: Tensor  # (2,) float32: mean loss and NLL per target token, over all ranks
    grad_norm: Tensor  # () float32: the gradient norm before clipping
    applied: Tensor | None  # () bool: False when the device skipped it; None: the host checked
    tgt_tokens: Tensor  # () float32: target tokens, all ranks
    src_tokens: int  # source tokens, all ranks

    def figures(self) -> Tensor:
        """(5,) float32 on the device: mean loss, mean NLL, gradient norm, target tokens, and
        1 when the update was applied, else 0."""
        applied = torch.ones_like(self.grad_norm) if self.applied is None else self.applied
        return torch.stack([*self.means, self.grad_norm, self.tgt_tokens, applied.float()])


@dataclass
class Window:
    """The updates since the last log line: `pending` ones, still on the device, and the
    token-weighted sums of those settled (read to the host), which the log line shows as means."""

    start: float = field(default_factory=time.perf_counter)
    pending: list[Update] = field(default_factory=list)
    loss: float = 0.0  # sum over steps of (mean loss per target token) * target tokens
    nll: float = 0.0
    tgt: int = 0  # target tokens
    src: int = 0  # source tokens
    grad_norm: float = 0.0  # of the last update settled
    steps: int = 0  # updates added
    last_rate: float | None = None  # target tokens/s of the last log line, for the progress bar
    after_timer: bool = False  # the line before it was written by time, not at a step count

    def add(self, update: Update) -> None:
        self.steps += 1
        self.pending.append(update)

    def settle(self) -> list[tuple[int, bool]]:
        """Read the pending updates' figures to the host, all in one read, and add those applied
        to the sums, in order. Returns (step, applied) of each update the device checked."""
        if not self.pending:
            return []
        rows = torch.stack([update.figures() for update in self.pending]).tolist()
        checked = []
        for update, (loss, nll, grad_norm, tgt, applied) in zip(self.pending, rows, strict=True):
            if update.applied is not None:
                checked.append((update.step, bool(applied)))
            if applied:
                self.loss += loss * int(tgt)
                self.nll += nll * int(tgt)
                self.tgt += int(tgt)
                self.src += update.src_tokens
                self.grad_norm = grad_norm
        self.pending = []
        return checked

    def seconds(self) -> float:
        return max(time.perf_counter() - self.start, 1e-9)


# ---------------------------------------------------------------------------------------------
# One update, and validating with its checkpoints
# ---------------------------------------------------------------------------------------------


def skips_on_device(run: Run) -> bool:
    """Whether a non-finite update is skipped by the device, with no read to the host: the
    fused AdamW kernel skips its step when told so by a flag on the device (`found_inf`, as
    the gradient scaler uses it). fp16 keeps its scaler, which decides on the host."""
    return run.cfg.train.fused_optimizer and not run.scaler.is_enabled()


def train_update(run: Run, group: list[Batch], step: int) -> Update | None:
    """One optimizer update on a group of `accum_steps` batches: gradients of sum(loss) /
    (target tokens in the group, all ranks), taking step number `step`.

    A non-finite loss or gradient skips the update. When `skips_on_device`, the device decides
    and nothing here waits for it (the schedule still advances: the update takes its step
    number); otherwise the host reads the loss and gradient norm and returns None."""
    env, model = run.env, run.model
    tgt_tokens = float(sum(b.num_tgt_tokens for b in group))
    num_tokens = distributed.all_reduce_sum(on_device(tgt_tokens, run.device), env)
    sums = torch.zeros(2, device=run.device)  # loss, nll
    run.optimizer.zero_grad(set_to_none=True)
    for i, batch in enumerate(group):
        with distributed.sync_gradients(model, env, i == len(group) - 1):
            loss, nll = token_losses(
                model,
                batch,
                run.cfg.train.label_smoothing,
                run.dtype,
                run.cross_entropy,
            )
            run.scaler.scale(loss * env.world_size / num_tokens).backward()
        sums += torch.stack([loss.detach(), nll])
    means = distributed.all_reduce_sum(sums, env) / num_tokens
    run.scaler.unscale_(run.optimizer)
    max_norm = run.cfg.train.clip_norm or float("inf")
    grad_norm = torch.nn.utils.clip_grad_norm_(run.raw_model.parameters(), max_norm)
    applied = None
    if skips_on_device(run):
        applied = means[0].isfinite() & grad_norm.isfinite()
        run.optimizer.found_inf = (~applied).float()  # read by the fused kernel
        run.optimizer.step()
        del run.optimizer.found_inf
    elif not update_is_finite(run, means, grad_norm):
        run.optimizer.zero_grad(set_to_none=True)
        run.scaler.update()
        return None
    else:
        run.scaler.step(run.optimizer)
    run.scaler.update()
    if not isinstance(run.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
        run.scheduler.step()
    src_tokens = sum(b.num_src_tokens for b in group) * env.world_size
    return Update(step, means.detach(), grad_norm.detach(), applied, num_tokens, src_tokens)


def update_is_finite(run: Run, means: Tensor, grad_norm: Tensor) -> bool:
    """Whether the loss and gradient norm are finite, read on the host (the gradient scaler
    checks the gradient itself)."""
    finite = math.isfinite(means[0].item())
    return finite and (run.scaler.is_enabled() or bool(grad_norm.isfinite()))


def on_device(value: float, device: torch.device) -> Tensor:
    """A float32 scalar tensor on `device`, copied without waiting for the device."""
    return torch.tensor(value).to(device, non_blocking=True)


def validate_and_save(run: Run, progress: Progress, log: RunLog) -> None:
    """Validate on rank 0, update the best score, the plateau schedule and early stopping,
    share the outcome with every rank, then write step-N.pt / best.pt / last.pt."""
    cfg, env = run.cfg, run.env
    if env.is_main:
        metrics = validate(
            cfg,
            run.raw_model,
            run.data,
            run.valid_set,
            run.valid_lines,
            run.device,
            run.dtype,
            log,
            progress.step,
        )
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


def count_skipped(
    cfg: Config, progress: Progress, consecutive_bad: int, log: RunLog, step: int
) -> int:
    """Count a skipped update (non-finite loss or gradient) at `step`; too many in a row stop
    the run. Returns the new number of consecutive skipped updates."""
    progress.skipped_steps += 1
    log.line(f"step {step}: non-finite loss or gradient, update skipped")
    if consecutive_bad + 1 >= cfg.train.max_bad_steps:
        raise TrainingDiverged(
            f"training diverged: {consecutive_bad + 1} consecutive non-finite steps at "
            f"step {step}; lower train.lr or check the data"
        )
    return consecutive_bad + 1


def settle(
    cfg: Config, progress: Progress, window: Window, log: RunLog, consecutive_bad: int
) -> int:
    """Read the window's pending updates (`Window.settle`) and count those the device skipped;
    returns the new number of consecutive skipped updates."""
    for step, applied in window.settle():
        consecutive_bad = 0 if applied else count_skipped(cfg, progress, consecutive_bad, log, step)
    return consecutive_bad


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


# ---------------------------------------------------------------------------------------------
# What the run prints and logs
# ---------------------------------------------------------------------------------------------


def log_start(run: Run, progress: Progress, log: RunLog, resumed: bool) -> None:
    if resumed:
        log.line(f"resumed from {run.last_path} at step {progress.step}, epoch {progress.epoch}")
        if run.changes_on_resume:
            log.line(f"changed since it was saved: {', '.join(run.changes_on_resume)}")
    else:
        log.line(
            f"run {run.run_dir}: {run.raw_model.num_parameters():,} parameters on {run.device}"
            f" ({'fp32' if run.dtype is None else run.dtype}), world size {run.env.world_size}"
        )
    if run.dtype == torch.bfloat16 and run.device.type == "cpu" and not cpu_has_fast_bf16():
        log.line(
            "warning: this CPU has no AVX-512, so bf16 matrix products run on slow fallback "
            "kernels (9-19x slower than fp32 on such a machine); train.precision=fp32 is faster"
        )
    if run.dtype == torch.float16 and run.device.type == "cpu":
        log.line(
            "warning: fp16 on a CPU is for checking the fp16 path of GPUs without bf16 (gradient "
            "scaler included); a step of transformer-tiny was 9x slower than fp32 on an AVX2 "
            "CPU; train.precision=fp32 is faster"
        )


def progress_bar(cfg: Config, progress: Progress, batches_per_epoch: int, main: bool) -> tqdm:
    """The bar of a terminal (none on other ranks, or when the output is not a terminal): steps
    done, to the run's last step with its ETA when it is known (`planned_last_step`)."""
    total = planned_last_step(cfg, progress, batches_per_epoch)
    counts = "{n_fmt} steps [{elapsed}{postfix}]"
    if total is not None:
        counts = "{l_bar}{bar}| {n_fmt}/{total_fmt} steps [{elapsed}<{remaining}{postfix}]"
    return tqdm(
        total=total,
        initial=progress.step,
        disable=None if main else True,
        bar_format=counts,
        dynamic_ncols=True,
    )


def bar_figures(progress: Progress, window: Window) -> tuple[float | None, float | None]:
    """The loss and target tokens/s that the bar shows: the token-weighted mean loss per target
    token of the updates settled since the last log line, and their rate; while there are none
    (right after a log line; on a GPU, until the next one), those of the last log line."""
    if window.tgt:
        return window.loss / window.tgt, window.tgt / window.seconds()
    return progress.train_loss, window.last_rate


def bar_postfix(progress: Progress, window: Window, lr: float, next_validation: str) -> str:
    """What the bar shows after its counts, e.g. `loss 5.123, lr 1.25e-04, 2,345 tgt tok/s,
    validation in 3:10`; a figure not known yet is left out."""
    loss, rate = bar_figures(progress, window)
    parts = [] if loss is None else [f"loss {loss:.3f}"]
    parts.append(f"lr {lr:.2e}")
    parts += [] if rate is None else [f"{rate:,.0f} tgt tok/s"]
    return ", ".join([*parts, f"validation {next_validation}"])


def show_progress(run: Run, progress: Progress, window: Window, saves: "Saves", bar: tqdm) -> None:
    """Advance the bar, with what the host knows without reading the device (`bar_postfix`)."""
    if not bar.disable:
        lr = run.optimizer.param_groups[0]["lr"]
        next_validation = saves.next_validation(progress, bar.format_dict["rate"])
        bar.set_postfix_str(bar_postfix(progress, window, lr, next_validation), refresh=False)
    bar.update(1)  # shown with this step's postfix


def log_line(run: Run, progress: Progress, window: Window, log: RunLog, reason: str) -> Window:
    """The log line and TensorBoard points of a settled window, written for `reason`
    (`log_reason`); returns the next window. A window whose updates were all skipped has
    nothing to show: it goes on."""
    if not window.tgt:
        return window
    lr = run.optimizer.param_groups[0]["lr"]
    tgt_per_s = window.tgt / window.seconds()
    loss, nll = window.loss / window.tgt, window.nll / window.tgt
    scalars = {"train/loss": loss, "train/nll": nll, "train/ppl": math.exp(min(nll, 100.0))}
    scalars |= {"train/lr": lr, "train/grad_norm": window.grad_norm, "train/epoch": progress.epoch}
    scalars["train/tgt_tokens_per_second"] = tgt_per_s
    scalars["train/tokens_per_second"] = (window.tgt + window.src) / window.seconds()
    log.scalars(progress.step, scalars)
    log.line(
        f"step {progress.step} epoch {progress.epoch} loss {loss:.4f} nll {nll:.4f} "
        f"lr {lr:.3g} |g| {window.grad_norm:.3g} {tgt_per_s:,.0f} tgt tok/s"
    )
    progress.train_loss = loss
    return Window(after_timer=reason == "time", last_rate=tgt_per_s)


def log_reason(step: int, window: Window, log_every: int, log_every_seconds: float) -> str | None:
    """Why a log line is due after `step`: "steps" at step 1 (so a short run has a curve from its
    start) and every `log_every` steps, "time" once the window has lasted `log_every_seconds`
    (0: never), or None. A step count that comes within `log_every` steps of a line written by
    time gives none: no two lines a moment apart."""
    by_steps = step == 1 or step % log_every == 0
    if by_steps and not (window.after_timer and window.steps < log_every):
        return "steps"
    if log_every_seconds and window.seconds() >= log_every_seconds:
        return "time"
    return None


def log_first_validation(run: Run, progress: Progress, log: RunLog, seconds: float) -> None:
    """On a CPU, say early when the first validation (and its checkpoint) will come, at the rate
    of the run's first CPU_ESTIMATE_AFTER updates, which took `seconds`: at step valid_every, or
    valid_every_minutes after the start when that comes sooner."""
    train = run.cfg.train
    if progress.history or progress.step >= train.valid_every:
        return
    steps_per_second = CPU_ESTIMATE_AFTER / seconds
    minutes = (train.valid_every - progress.step) / steps_per_second / 60
    when = f"at step {train.valid_every}"
    by_time = max(train.valid_every_minutes - seconds / 60, 0.0)
    if train.valid_every_minutes and by_time < minutes:
        minutes, step = by_time, progress.step + round(by_time * 60 * steps_per_second)
        when = f"near step {step} (train.valid_every_minutes)"
    message = (
        f"first validation {when}, in about {minutes:.0f} min at {steps_per_second:.2f} "
        f"steps/s; last.pt is saved every {train.save_every_minutes:g} min"
    )
    if minutes > HINT_AFTER_MINUTES:
        message += "; train.valid_every_minutes validates sooner (docs/training.md, on a CPU)"
    log.line(message)


def planned_last_step(cfg: Config, progress: Progress, batches_per_epoch: int) -> int | None:
    """The step at which the run ends when only train.max_steps and train.max_epochs can end it
    (the total of the progress bar, so that its ETA holds); None when train.patience may end it
    at any validation, which no bar can foresee."""
    train = cfg.train
    if train.patience:
        return None
    updates_per_epoch = math.ceil(batches_per_epoch / train.accum_steps)
    left_in_epoch = updates_per_epoch - math.ceil(progress.position / train.accum_steps)
    later_epochs = train.max_epochs - progress.epoch - 1
    by_epochs = progress.step + left_in_epoch + later_epochs * updates_per_epoch
    return min(by_epochs, train.max_steps) if train.max_steps else by_epochs


# ---------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------


def train(
    cfg: Config,
    prepare_missing: bool = False,
    verify_data: bool = False,
    clock: Callable[[], float] = time.monotonic,
) -> Progress:
    """Train (or resume) the run described by `cfg`; returns where training ended.

    prepare_missing: prepare data.prepared first when it is missing. verify_data: check every
    file of data.prepared against its manifest's checksums first (sizes are always checked).
    clock: the seconds by which validating and saving by time are due (`Saves`)."""
    device = pick_device(cfg.train.device, "train.device")
    env = distributed.init_distributed(device.type)
    device = distributed.local_device(device, env)
    try:
        with lock_run_folder(run_dir_of(cfg), env):
            run = set_up(cfg, prepare_missing, device, env, verify_data)
            progress = start(run)
            if finished_reason(cfg, progress) is None:
                with StopSignals() as signals:
                    train_loop(run, progress, Saves(run, signals, clock))
            # Rank 0 may still be validating and saving: end the group only when all are done.
            distributed.barrier(env)
        return progress
    except OSError as err:  # a full disk, a run folder under a file, ...
        where = err.filename or run_dir_of(cfg)
        raise UserError(f"{where}: {err.strerror or err}") from None
    finally:
        distributed.shutdown(env)


@contextmanager
def lock_run_folder(run_dir: Path, env: distributed.Dist) -> Iterator[None]:
    """Hold the run folder's lock (`seq2seq.training.run_lock`) on rank 0 for the block; when it is
    refused, every rank stops with rank 0's message."""
    with ExitStack() as stack:
        refusal = None
        if env.is_main:
            try:
                stack.enter_context(RunFolderLock(run_dir))
            except UserError as err:
                refusal = str(err)
        refusal = distributed.broadcast_object(refusal, env)
        if refusal is not None:
            raise UserError(refusal)
        yield


def start(run: Run) -> Progress:
    """Resume from last.pt or start a new run, saying which; a finished run only says so."""
    run_dir, env = run.run_dir, run.env
    if env.is_main:
        remove_temporary_files(run_dir)  # left by a save that was killed; the lock is ours
    progress = resume(run)
    if progress is not None and (reason := finished_reason(run.cfg, progress)):
        if env.is_main:
            print(
                f"run {run_dir} already finished at step {progress.step} ({reason}); best valid "
                f"BLEU {progress.best_bleu:.2f} at step {progress.best_step}: nothing to do"
            )
        return progress
    if progress is None and env.is_main:
        print(f"no checkpoint in {run_dir}: starting a new run")
    if env.is_main and (progress is None or run.changes_on_resume):
        (run_dir / "config.toml").write_text(dump_toml(run.cfg.to_dict()), encoding="utf-8")
    distributed.barrier(env)
    return progress or Progress()


def training_batches(run: Run) -> tuple[TokenBatchSampler, Callable[[], Iterator[Batch]]]:
    """This rank's batches of the training split: the sampler that picks them, and a function
    that gives the rest of its epoch's batches on the training device. They are padded to the
    longest row of each batch, or with train.length_buckets to a few fixed shapes
    (`BucketCollate`), the sampler then sizing each batch by the bucket of its rows; and made on
    the host, or with train.data_on_device on the device (`DeviceCorpus`: the same batches)."""
    train, env = run.cfg.train, run.env
    src_lens, tgt_lens = run.train_set.src_lens, run.train_set.tgt_lens
    if train.length_buckets:
        src_lens = tgt_lens = bucket_lengths(np.maximum(src_lens, tgt_lens), train.length_buckets)
    sampler = TokenBatchSampler(
        src_lens,
        tgt_lens,
        train.max_tokens,
        shuffle=True,
        seed=train.seed,
        num_replicas=env.world_size,
        rank=env.rank,
    )
    if train.data_on_device:
        corpus = DeviceCorpus(run.train_set, run.device, train.length_buckets, train.max_tokens)
        return sampler, lambda: map(corpus.batch, sampler)
    collate_fn: Callable[[list[Example]], Batch] = collate
    if train.length_buckets:
        collate_fn = BucketCollate(train.length_buckets, train.max_tokens)
    return sampler, lambda: (
        batch.to(run.device, non_blocking=True)
        for batch in make_loader(run.train_set, sampler, train.num_workers, collate_fn=collate_fn)
    )


def train_loop(run: Run, progress: Progress, saves: "Saves") -> None:
    """Update after update until max_steps, max_epochs, early stopping or a stop signal. Nothing
    in a step reads the device, but the log lines (every `log_every` steps or
    `log_every_seconds`), validation and saving: a GPU runs ahead of the host. With a bar on a
    CPU, where a read costs nothing, each step's figures are read at once, for the bar's running
    loss and tokens/s."""
    cfg, env = run.cfg, run.env
    resumed = progress.step > 0
    log = RunLog(run.run_dir, env.is_main, purge_step=progress.step + 1 if resumed else None)
    log_start(run, progress, log, resumed)
    sampler, epoch_batches = training_batches(run)
    bar = progress_bar(cfg, progress, len(sampler), env.is_main)
    read_every_step = not bar.disable and run.device.type == "cpu"
    run.model.train()
    window, consecutive_bad, started = Window(), 0, time.perf_counter()
    first_step, last_validated = progress.step, progress.step if resumed else -1
    while finished_reason(cfg, progress) is None:
        sampler.load_state_dict({"epoch": progress.epoch, "position": progress.position})
        batches = epoch_batches()
        while group := list(islice(batches, cfg.train.accum_steps)):
            progress.position += len(group)
            update = train_update(run, group, progress.step + 1)
            if update is None:  # the host saw a non-finite loss or gradient: skipped
                consecutive_bad = count_skipped(cfg, progress, consecutive_bad, log, progress.step)
                continue
            consecutive_bad = 0 if update.applied is None else consecutive_bad
            progress.step += 1
            window.add(update)
            reason = log_reason(
                progress.step, window, cfg.train.log_every, cfg.train.log_every_seconds
            )
            if reason or read_every_step:
                consecutive_bad = settle(cfg, progress, window, log, consecutive_bad)
            if reason:
                window = log_line(run, progress, window, log, reason)
            show_progress(run, progress, window, saves, bar)
            if progress.step == 1 and env.is_main:
                data, lines = run.data, run.valid_lines
                log_first_attention(cfg, run.raw_model, data, lines, run.device, log, 1)
            if progress.step == first_step + CPU_ESTIMATE_AFTER and run.device.type == "cpu":
                log_first_validation(run, progress, log, time.perf_counter() - started)

            paused = time.perf_counter()  # validation and saving do not count towards tokens/s
            validate_now, save_now, stop_signal = saves.due(progress)
            if validate_now or save_now:
                consecutive_bad = settle(cfg, progress, window, log, consecutive_bad)
                saves.save(progress, log, validate_now)
                last_validated = progress.step if validate_now else last_validated
            window.start += time.perf_counter() - paused
            if stop_signal:
                bar.close()
                message = f"interrupted at step {progress.step}: saved {run.last_path}"
                log.line(message, echo=False)
                log.close()
                saves.signals.exit(message, announce=env.is_main)
            if saves.reached_max(progress) or progress.stopped_early:
                break
        else:
            progress.epoch += 1
            progress.position = 0
    bar.close()
    settle(cfg, progress, window, log, consecutive_bad)
    if last_validated != progress.step:
        validate_and_save(run, progress, log)
    log.line(
        f"done at step {progress.step}, epoch {progress.epoch}: best valid BLEU "
        f"{progress.best_bleu:.2f} at step {progress.best_step} ({run.run_dir / 'best.pt'})"
    )
    log.close()


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

    def reached_max(self, progress: Progress) -> bool:
        max_steps = self.run.cfg.train.max_steps
        return bool(max_steps and progress.step >= max_steps)

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
        validate = validate or self.reached_max(progress)
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
