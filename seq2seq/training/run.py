"""A training run: its folder, and its setup (data, model, optimizer, schedule). Resuming it is
seq2seq/training/resume.py, what its checkpoints hold saving.py, the loop loop.py."""

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from seq2seq.config import Config
from seq2seq.data.batching import ParallelDataset
from seq2seq.data.prepared_corpus import PreparedData, prepare_hint
from seq2seq.device import autocast_dtype, decode_dtype
from seq2seq.errors import UserError
from seq2seq.fast import FastModel, speed_up
from seq2seq.fast import loss as fast_loss
from seq2seq.models import build_model
from seq2seq.models.base import Seq2SeqModel
from seq2seq.models.size import check_model_fits
from seq2seq.training import distributed
from seq2seq.training.loss import CrossEntropy, label_smoothed_cross_entropy
from seq2seq.training.reproducibility import seed_everything
from seq2seq.training.run_data import check_against_data, load_data


class TrainingDiverged(UserError):
    """Too many consecutive steps had a non-finite loss or gradient."""


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint and restored on resume."""

    step: int = 0  # optimizer updates done
    epoch: int = 0
    position: int = 0  # batches of `epoch` already consumed (by this rank)
    best_bleu: float = -1.0
    best_step: int = 0
    validations_without_improvement: int = 0
    stopped_early: bool = False  # by train.patience
    skipped_steps: int = 0  # non-finite losses skipped so far
    train_loss: float | None = None  # of the last log line, which the progress bar shows on
    # resuming (absent from checkpoints saved before it was kept: None)
    history: list[dict[str, float]] = field(default_factory=list)  # one entry per validation


@dataclass
class Run:
    """Everything the loop works with, set up once by `set_up`."""

    cfg: Config
    env: distributed.Dist
    device: torch.device
    dtype: torch.dtype | None  # autocast dtype; None: fp32
    run_dir: Path
    data: PreparedData
    train_set: ParallelDataset
    valid_set: ParallelDataset
    valid_lines: tuple[list[str], list[str]]
    raw_model: Seq2SeqModel
    model: torch.nn.Module  # raw_model, compiled and/or wrapped in DistributedDataParallel
    optimizer: torch.optim.Optimizer
    scheduler: Any  # LambdaLR or ReduceLROnPlateau
    scaler: torch.amp.GradScaler
    cross_entropy: CrossEntropy  # the loss that trains raw_model: `cross_entropy_of` it
    changes_on_resume: list[str] = field(default_factory=list)  # set by `resume`

    @property
    def last_path(self) -> Path:
        return self.run_dir / "last.pt"


def make_scheduler(
    cfg: Config, optimizer: torch.optim.Optimizer
) -> torch.optim.lr_scheduler.LRScheduler | torch.optim.lr_scheduler.ReduceLROnPlateau:
    """inverse_sqrt: linear warmup to `lr`, then lr * sqrt(warmup / step) (Vaswani et al.).
    linear: linear warmup to `lr`, then linear decay, lr / (max_steps - warmup + 1) at step
    `max_steps`, 0 after it (for a run of known length: the rate anneals by its last step).
    plateau: constant `lr`, multiplied by `plateau_factor` when valid BLEU has not risen by more
    than `plateau_threshold` (BLEU points) over the best so far for `plateau_patience`
    validations."""
    train = cfg.train
    if train.schedule == "plateau":
        return torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer,
            mode="max",
            factor=train.plateau_factor,
            patience=train.plateau_patience,
            threshold=train.plateau_threshold,
            threshold_mode="abs",
            min_lr=train.min_lr,
        )
    warmup = max(train.warmup_steps, 1)
    if train.schedule == "linear":
        # the last step's rate is lr / decay (at least 1: benchmarks/gpu_profile.py sets
        # max_steps past the configuration's checks)
        decay = max(train.max_steps - warmup + 1, 1)
        return torch.optim.lr_scheduler.LambdaLR(
            optimizer,
            lambda step: min((step + 1) / warmup, max(train.max_steps - step, 0) / decay),
        )
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))
    )


def set_up(
    cfg: Config,
    prepare_missing: bool,
    device: torch.device,
    env: distributed.Dist,
    verify_data: bool = False,
) -> Run:
    """Data, model (seeded), optimizer and schedule of a new run; `resume` restores a saved one."""
    dtype = autocast_dtype(cfg.train.precision, device)
    decode_dtype(cfg.decode.precision, device)  # a bad one fails now, not at the first validation
    data = load_data(cfg, prepare_missing, env, verify_data)
    # the teacher's links checked here: a folder without them is refused with its command
    train_set = data.dataset("train", bool(cfg.train.alignment_weight), prepare_hint(cfg))
    valid_set = data.dataset("valid")
    valid_lines = data.lines("valid")
    if cfg.train.valid_max_sentences:
        valid_lines = tuple(side[: cfg.train.valid_max_sentences] for side in valid_lines)
    vocab_sizes = (data.src_tokenizer.vocab_size, data.tgt_tokenizer.vocab_size)
    check_against_data(cfg, train_set, valid_set, vocab_sizes[1])
    check_model_fits(cfg, *vocab_sizes, device, training=True)
    seed_everything(cfg.train.seed)
    raw_model = build_model(cfg.model, *vocab_sizes, data.joint, verbose=env.is_main).to(device)
    if cfg.model.fast:
        raw_model = speed_up(raw_model)
    optimizer = torch.optim.AdamW(
        raw_model.parameters(),
        lr=cfg.train.lr,
        betas=cfg.train.optimizer_betas,
        weight_decay=cfg.train.weight_decay,
        fused=True if cfg.train.fused_optimizer else None,  # None: PyTorch's default (foreach)
    )
    # With train.length_buckets, `dynamic=False`: one graph per bucket's shape. Without, Dynamo's
    # automatic dynamic shapes: a graph for the first batch, then one with the changing sizes
    # dynamic that serves every later batch (2 graphs in 200 steps, tests/test_compile.py);
    # dynamic=False would recompile for each new shape until Dynamo's recompile_limit (8).
    dynamic = False if cfg.train.length_buckets else None
    model = torch.compile(raw_model, dynamic=dynamic) if cfg.train.compile else raw_model
    return Run(
        cfg=cfg,
        env=env,
        device=device,
        dtype=dtype,
        run_dir=run_dir_of(cfg),
        data=data,
        train_set=train_set,
        valid_set=valid_set,
        valid_lines=valid_lines,
        raw_model=raw_model,
        model=distributed.wrap_model(model, device, env),
        optimizer=optimizer,
        scheduler=make_scheduler(cfg, optimizer),
        scaler=torch.amp.GradScaler(device.type, enabled=dtype == torch.float16),
        cross_entropy=cross_entropy_of(raw_model),
    )


def cross_entropy_of(model: torch.nn.Module) -> CrossEntropy:
    """The loss function that trains `model`: for a fast twin (seq2seq.fast)
    `seq2seq.fast.loss.label_smoothed_cross_entropy`, its gradient written by hand, else the
    textbook `seq2seq.training.loss.label_smoothed_cross_entropy` (they compute the same)."""
    if isinstance(model, FastModel):
        return fast_loss.label_smoothed_cross_entropy
    return label_smoothed_cross_entropy


def run_dir_of(cfg: Config) -> Path:
    return Path(cfg.train.run_dir or f"checkpoints/{cfg.train.run_name}")
