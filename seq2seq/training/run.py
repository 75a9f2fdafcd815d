"""A training run: its folder, its setup (data, model, optimizer, schedule), what its
checkpoints hold, and resuming it from last.pt. The loop itself is in seq2seq/training/loop.py."""

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from seq2seq.checkpoints import (
    CHECKPOINT_FORMAT,
    checkpoint_tokenizers,
    load_checkpoint,
    tokenizer_entry,
)
from seq2seq.config import Config, DecodeConfig
from seq2seq.config_file import config_from_dict
from seq2seq.data.batching import ParallelDataset
from seq2seq.data.manifest import tokenization_options
from seq2seq.data.prepare import prepare
from seq2seq.data.prepared_corpus import PreparedData
from seq2seq.decoding.line_translator import source_limit
from seq2seq.device import autocast_dtype, decode_dtype
from seq2seq.errors import UserError
from seq2seq.fast import FastModel, speed_up
from seq2seq.fast import loss as fast_loss
from seq2seq.models import build_model
from seq2seq.models.base import Seq2SeqModel
from seq2seq.models.size import check_model_fits
from seq2seq.training import distributed
from seq2seq.training.checkpoint import save_checkpoint
from seq2seq.training.loss import CrossEntropy, label_smoothed_cross_entropy
from seq2seq.training.reproducibility import rng_state, seed_everything, set_rng_state


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


# ---------------------------------------------------------------------------------------------
# Setup: device, precision, data, model, optimizer, schedule
# ---------------------------------------------------------------------------------------------


def load_data(
    cfg: Config, prepare_missing: bool, env: distributed.Dist, verify: bool = False
) -> PreparedData:
    """The prepared folder of `cfg`, checked (file sizes; every checksum when `verify`), and
    prepared first when missing and `prepare_missing`."""
    folder = Path(cfg.data.prepared)
    augmentation = cfg.data.augmentation
    if not (folder / "manifest.json").is_file():
        if not prepare_missing:
            raise UserError(
                f"data.prepared: {folder} is not a prepared corpus; run `make data` or "
                "seq2seq prepare, or pass --prepare"
            )
        if env.is_main:
            prepare(
                cfg.data.corpus,
                cfg.data.src,
                cfg.data.tgt,
                folder,
                vocab_size=cfg.data.vocab_size,
                joint=cfg.data.joint_vocab,
                split_digits=cfg.data.split_digits,
                byte_fallback=cfg.data.byte_fallback,
                **augmentation,
                augment_seed=cfg.train.seed,
            )
        distributed.barrier(env)
    data = PreparedData.load(folder)
    if verify:
        data.verify()
    data.check_vocabulary(cfg.data.vocab_size, cfg.data.joint_vocab)
    data.check_augmentation(augmentation)
    # The checkpoints' configuration names the corpus the folder holds, whatever data.corpus
    # said: the model's domain is read from it (seq2seq.data.corpora.domain_of).
    cfg.data.corpus = data.manifest["corpus"]
    return data


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
    train_set, valid_set = data.dataset("train"), data.dataset("valid")  # checked here
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
    # With train.length_buckets every batch has one of a few shapes: `dynamic=False` compiles
    # one graph per shape (at most MAX_LENGTH_BUCKETS, within Dynamo's recompile_limit), each
    # specialised to its sizes. Without buckets, no `dynamic=`: batch size and lengths change
    # every step, and Dynamo's automatic dynamic shapes compile for the first batch's shapes,
    # then once more with the changed dimensions dynamic, and that graph serves every later
    # batch: the Transformer compiles 2 graphs in 200 steps (tests/test_compile.py).
    # dynamic=True compiled as many (a first batch of 16 sentences of 16 tokens recompiled all
    # the same); dynamic=False recompiles for each new shape up to Dynamo's recompile_limit (8),
    # then runs the model uncompiled.
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


def check_against_data(
    cfg: Config, train_set: ParallelDataset, valid_set: ParallelDataset, tgt_vocab_size: int
) -> None:
    """The values of `cfg` that only the data can refute: a batch must hold the longest training
    sentence, a beam cannot be wider than the target vocabulary, and validation must be able to
    translate every valid sentence it uses."""
    longest = int(max(train_set.src_lens.max(), train_set.tgt_lens.max()))
    if cfg.train.max_tokens < longest:
        raise UserError(
            f"train.max_tokens={cfg.train.max_tokens}: smaller than the longest training "
            f"sentence ({longest} tokens, special tokens included); set it to at least {longest}"
        )
    buckets = cfg.train.length_buckets
    if buckets and longest > buckets[-1]:
        raise UserError(
            f"train.length_buckets={list(buckets)}: the longest training sentence has {longest} "
            f"tokens (special tokens included); add a bucket of at least {longest}"
        )
    if buckets and cfg.train.max_tokens < buckets[-1]:
        raise UserError(
            f"train.max_tokens={cfg.train.max_tokens}: smaller than the largest of "
            f"train.length_buckets ({buckets[-1]}); a batch of that bucket could hold no sentence"
        )
    for key in ("beam_size", "valid_beam_size"):
        beam = getattr(cfg.decode, key)
        if beam > tgt_vocab_size:
            raise UserError(
                f"decode.{key}={beam}: larger than the target vocabulary ({tgt_vocab_size} pieces)"
            )
    used = valid_set.src_lens[: cfg.train.valid_max_sentences or None] - 1  # pieces, no EOS
    limit = source_limit(cfg.decode, cfg.decode.valid_beam_size)
    if not cfg.decode.truncate_src and len(used) and used.max() > limit:
        line = int(used.argmax()) + 1
        raise UserError(
            f"decode.max_src_pieces={cfg.decode.max_src_pieces}: valid sentence {line} has "
            f"{int(used.max())} pieces, more than validation can take ({limit}); raise "
            "decode.max_src_pieces or set decode.truncate_src=true"
        )


def run_dir_of(cfg: Config) -> Path:
    return Path(cfg.train.run_dir or f"checkpoints/{cfg.train.run_name}")


# ---------------------------------------------------------------------------------------------
# Checkpoints: what a training checkpoint holds, resuming from one
# ---------------------------------------------------------------------------------------------


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


# Keys a resumed run may change: when it stops, how often it validates, saves and logs, where
# it runs, on the fast modules or the textbook ones (model.fast: they compute the same), where
# its batches are made (train.data_on_device, num_workers: the same batches), and how
# its checkpoints translate afterwards. Any other key (model, data, seed,
# learning rate and schedule, batches, precision, what validation measures) would make the run
# that continues another run than the one saved.
CHANGEABLE_ON_RESUME = frozenset(
    [
        "model.fast",
        "train.run_name",
        "train.run_dir",
        "train.device",
        "train.compile",
        "train.data_on_device",
        "train.num_workers",
        "train.max_steps",
        "train.max_epochs",
        "train.patience",
        "train.max_bad_steps",
        "train.valid_every",
        "train.valid_every_minutes",
        "train.valid_batch_tokens",
        "train.save_every",
        "train.save_every_minutes",
        "train.keep_last",
        "train.log_every",
        "train.log_every_seconds",
        "train.attention_samples",
        "train.attention_history",
    ]
    + [f"decode.{key.name}" for key in fields(DecodeConfig) if key.name != "valid_beam_size"]
)


def changed_keys(saved: Config, cfg: Config) -> dict[str, str]:
    """Each key whose value in `cfg` differs from `saved`: `section.key` -> its change, as
    `section.key=new (saved: old)` with TOML values."""
    changes = {}
    for section, values in cfg.to_dict().items():
        for key, value in values.items():
            old = getattr(getattr(saved, section), key)
            if value != old:
                name = f"{section}.{key}"
                changes[name] = f"{name}={json.dumps(value)} (saved: {json.dumps(old)})"
    return changes


def check_resumable(saved: Config, cfg: Config, path: Path) -> list[str]:
    """The changes of `cfg` against the configuration `saved` in `path`, when a resume may make
    them all (CHANGEABLE_ON_RESUME); any other change is refused, naming every such key."""
    changes = changed_keys(saved, cfg)
    refused = [text for name, text in changes.items() if name not in CHANGEABLE_ON_RESUME]
    if refused:
        raise UserError(
            f"{path}: this run was saved with other values of keys that change its training: "
            f"{', '.join(refused)}; resume it without these changes, or start a new run with "
            "another train.run_name (or train.run_dir)"
        )
    return list(changes.values())


def check_same_tokens(checkpoint: dict[str, Any], data: PreparedData, path: Path) -> None:
    """`UserError` unless the checkpoint's tokenizers are the prepared folder's: a folder
    prepared again with other options (e.g. --no-byte-fallback) gives other token ids."""
    saved = [tokenizer.sha256 for tokenizer in checkpoint_tokenizers(checkpoint)]
    if saved != [data.src_tokenizer.sha256, data.tgt_tokenizer.sha256]:
        raise UserError(
            f"{path}: this run was trained on other tokens than {data.folder} now holds (it was "
            f"prepared again, now with {tokenization_options(data.manifest['settings'])}); "
            "resume on the folder the run started with, or start a new run with another "
            "train.run_name"
        )


def resume(run: Run) -> Progress | None:
    """Restore the run from last.pt when there is one: weights, optimizer, schedule, progress
    and this rank's random generators, and note in `run.changes_on_resume` the keys changed
    since (those allowed by `check_resumable`). None: no checkpoint, a new run."""
    if not run.last_path.is_file():
        return None
    checkpoint = load_checkpoint(run.last_path, map_location=run.device)
    saved = config_from_dict(checkpoint["config"])
    run.changes_on_resume = check_resumable(saved, run.cfg, run.last_path)
    check_same_tokens(checkpoint, run.data, run.last_path)
    state = checkpoint["training"]
    saved_world_size = len(state["rng"])
    if saved_world_size != run.env.world_size:
        raise UserError(
            f"{run.last_path}: saved by {saved_world_size} process(es), resumed by "
            f"{run.env.world_size}: each process's place in the epoch would be lost; resume "
            f"with {saved_world_size} (torchrun --nproc_per_node) or start a new train.run_name"
        )
    run.raw_model.load_state_dict(checkpoint["model"])
    run.optimizer.load_state_dict(state["optimizer"])
    run.scheduler.load_state_dict(state["scheduler"])
    run.scaler.load_state_dict(state["scaler"])
    set_rng_state(state["rng"][run.env.rank])
    return Progress(**state["progress"])


def finished_reason(cfg: Config, progress: Progress) -> str | None:
    """Why a run whose progress is `progress` has nothing left to do; None: it has."""
    if progress.stopped_early:
        return f"stopped early, no BLEU improvement in {cfg.train.patience} validations"
    if cfg.train.max_steps and progress.step >= cfg.train.max_steps:
        return f"train.max_steps={cfg.train.max_steps} reached"
    if progress.epoch >= cfg.train.max_epochs:
        return f"train.max_epochs={cfg.train.max_epochs} reached"
    return None


def save_last(run: Run, progress: Progress) -> None:
    """Write last.pt (rank 0), with every rank's random generators."""
    states = distributed.gather_objects(rng_state(), run.env)
    if run.env.is_main:
        check_weights_finite(run.raw_model, progress.step)
        save_checkpoint(training_checkpoint(run, progress, states), run.last_path)


def check_weights_finite(model: torch.nn.Module, step: int) -> None:
    if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
        raise TrainingDiverged(f"step {step}: weights are not finite; not saving")
