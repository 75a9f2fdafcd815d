"""Training, read top to bottom.

    prepared corpus -> token-budget batches (shuffled per epoch)
    for each group of `accum_steps` batches:
        one step (seq2seq/training/step.py): label-smoothed cross-entropy of the teacher-forced
            logits, per target token; backward, clip the gradient norm, AdamW, the schedule
        every `log_every` steps or `log_every_seconds`: the losses the steps left on the
            device, read at once, to train.log and TensorBoard (progress_report.py)
        every `valid_every` steps or `valid_every_minutes`: valid loss and perplexity, BLEU and
            chrF of real decoding, attention maps and sample translations to TensorBoard, the
            attention history, step-N.pt / best.pt / last.pt (saving.py)
        every `save_every_minutes`: last.pt

A run folder holds config.toml, train.log, TensorBoard events, checkpoints and train.lock (one
process at a time trains in it). docs/training.md says how a run resumes exactly, stops on
Ctrl-C or SIGTERM, and where each key of the GPU speed recipe acts.
"""

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from itertools import islice
from pathlib import Path

import numpy as np

from seq2seq.config import Config
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
from seq2seq.device import pick_device
from seq2seq.errors import UserError
from seq2seq.training import distributed
from seq2seq.training.progress_report import (
    CPU_ESTIMATE_AFTER,
    Window,
    log_first_validation,
    log_line,
    log_reason,
    log_start,
    progress_bar,
    show_progress,
)
from seq2seq.training.resume import finished_reason, start
from seq2seq.training.run import Progress, Run, TrainingDiverged, run_dir_of, set_up
from seq2seq.training.run_lock import RunFolderLock
from seq2seq.training.run_log import RunLog
from seq2seq.training.saving import Saves, validate_and_save
from seq2seq.training.signals import StopSignals
from seq2seq.training.step import train_update
from seq2seq.training.validation import log_first_attention


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


def train_loop(run: Run, progress: Progress, saves: Saves) -> None:
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
                log_first_attention(run, log, 1)
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
            if finished_reason(cfg, progress):  # max_steps, or early stopping
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
