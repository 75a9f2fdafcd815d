"""What a run shows while it trains: the progress bar of a terminal, the log lines of
train.log and TensorBoard (every `log_every` steps or `log_every_seconds`), and, on a CPU,
when the first validation will come."""

import math
import time
from dataclasses import dataclass, field

import torch
from tqdm import tqdm

from seq2seq.config import Config
from seq2seq.device import cpu_has_fast_bf16
from seq2seq.training.run import Progress, Run
from seq2seq.training.run_log import RunLog
from seq2seq.training.saving import Saves
from seq2seq.training.step import Update

CPU_ESTIMATE_AFTER = 20  # updates timed before a CPU run says when its first validation comes
HINT_AFTER_MINUTES = 10  # a first validation further away than this names train.valid_every_minutes


@dataclass
class Window:
    """The updates since the last log line: `pending` ones, still on the device, and the
    token-weighted sums of those settled (read to the host), which the log line shows as means."""

    start: float = field(default_factory=time.perf_counter)
    pending: list[Update] = field(default_factory=list)
    loss: float = 0.0  # sum over steps of (mean loss per target token) * target tokens
    nll: float = 0.0
    alignment: float = 0.0  # the same, of the alignment loss (train.alignment_weight)
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
        for update, row in zip(self.pending, rows, strict=True):
            loss, nll, alignment, grad_norm, tgt, applied = row
            if update.applied is not None:
                checked.append((update.step, bool(applied)))
            if applied:
                self.loss += loss * int(tgt)
                self.nll += nll * int(tgt)
                self.alignment += alignment * int(tgt)
                self.tgt += int(tgt)
                self.src += update.src_tokens
                self.grad_norm = grad_norm
        self.pending = []
        return checked

    def seconds(self) -> float:
        return max(time.perf_counter() - self.start, 1e-9)


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
    alignment = ""
    if run.cfg.train.alignment_weight:
        scalars["train/alignment"] = window.alignment / window.tgt
        alignment = f" alignment {scalars['train/alignment']:.4f}"
    log.scalars(progress.step, scalars)
    log.line(
        f"step {progress.step} epoch {progress.epoch} loss {loss:.4f} nll {nll:.4f}{alignment} "
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
