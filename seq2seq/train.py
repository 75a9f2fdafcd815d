"""Training, read top to bottom.

    prepared corpus -> token-budget batches (shuffled per epoch)
    for each group of `accum_steps` batches:
        loss = label-smoothed cross-entropy of the teacher-forced logits, per target token
        backward, clip the gradient norm, AdamW step, learning-rate schedule
        every `valid_every` steps: valid loss and perplexity, BLEU and chrF of real decoding,
            attention maps and sample translations to TensorBoard, best.pt / last.pt

A run folder holds everything: config.toml, train.log, TensorBoard events, checkpoints. Starting
the same command again resumes from last.pt exactly: weights, optimizer, schedule, step, epoch,
the position inside the epoch and every random generator come back as they were saved.
"""

import math
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from seq2seq import distributed
from seq2seq.batching import Batch, ParallelDataset, TokenBatchSampler, make_loader
from seq2seq.checkpoint import (
    CHECKPOINT_FORMAT,
    copy_checkpoint,
    load_checkpoint,
    save_checkpoint,
    tokenizer_entry,
)
from seq2seq.config import Config, config_from_dict, dump_toml
from seq2seq.device import autocast_dtype, cpu_has_fast_bf16, decode_dtype, pick_device
from seq2seq.errors import UserError
from seq2seq.evaluation import evaluate
from seq2seq.loss import label_smoothed_cross_entropy
from seq2seq.models import build_model
from seq2seq.models.base import Seq2SeqModel
from seq2seq.plots import attention_figure
from seq2seq.prepare import PreparedData, prepare
from seq2seq.reproducibility import rng_state, seed_everything, set_rng_state
from seq2seq.run_log import RunLog
from seq2seq.specials import BOS_ID, EOS_ID
from seq2seq.translator import Translator


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
    skipped_steps: int = 0  # non-finite losses skipped so far
    history: list[dict[str, float]] = field(default_factory=list)  # one entry per validation


@dataclass
class Window:
    """Token-weighted sums over the steps since the last log line; logged as means."""

    start: float = field(default_factory=time.perf_counter)
    loss: float = 0.0  # sum over steps of (mean loss per target token) * target tokens
    nll: float = 0.0
    tgt: int = 0  # target tokens
    src: int = 0  # source tokens

    def add(self, loss: float, nll: float, tgt: int, src: int) -> None:
        self.loss += loss * tgt
        self.nll += nll * tgt
        self.tgt += tgt
        self.src += src


# ---------------------------------------------------------------------------------------------
# Setup: device, precision, data, model, optimizer, schedule
# ---------------------------------------------------------------------------------------------


def load_data(cfg: Config, prepare_missing: bool, env: distributed.Dist) -> PreparedData:
    folder = Path(cfg.data.prepared)
    if not (folder / "manifest.json").is_file():
        if not prepare_missing:
            raise UserError(
                f"data.prepared: {folder} is not a prepared corpus; run `make data` or "
                "scripts/prepare_data.py, or pass --prepare"
            )
        if env.is_main:
            prepare(
                cfg.data.corpus,
                cfg.data.src,
                cfg.data.tgt,
                folder,
                vocab_size=cfg.data.vocab_size,
                joint=cfg.data.joint_vocab,
            )
        distributed.barrier(env)
    data = PreparedData.load(folder)
    data.check_vocabulary(cfg.data.vocab_size, cfg.data.joint_vocab)
    return data


def make_scheduler(
    cfg: Config, optimizer: torch.optim.Optimizer
) -> torch.optim.lr_scheduler.LRScheduler | torch.optim.lr_scheduler.ReduceLROnPlateau:
    """inverse_sqrt: linear warmup to `lr`, then lr * sqrt(warmup / step) (Vaswani et al.).
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
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))
    )


# ---------------------------------------------------------------------------------------------
# The loss
# ---------------------------------------------------------------------------------------------


def token_losses(
    model: torch.nn.Module, batch: Batch, label_smoothing: float, dtype: torch.dtype | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed label-smoothed loss and summed plain NLL over the batch's target tokens
    (seq2seq.loss). Padding positions are ignored. Both are float32 scalars; divide by the token
    count."""
    with torch.autocast(batch.src.device.type, dtype=dtype or torch.float32, enabled=bool(dtype)):
        logits = model(batch.src, batch.src_lens, batch.tgt_in)
    return label_smoothed_cross_entropy(
        logits.float().flatten(0, 1), batch.tgt_out.flatten(), label_smoothing
    )


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


@torch.no_grad()
def valid_loss(
    model: Seq2SeqModel, dataset: ParallelDataset, max_tokens: int, device: torch.device, dtype
) -> tuple[float, float]:
    """Mean NLL per target token on `dataset` and its perplexity."""
    sampler = TokenBatchSampler(dataset.src_lens, dataset.tgt_lens, max_tokens, shuffle=False)
    total_nll, total_tokens = 0.0, 0
    for batch in make_loader(dataset, sampler):
        batch = batch.to(device)
        _, nll = token_losses(model, batch, 0.0, dtype)
        total_nll += nll.item()
        total_tokens += batch.num_tgt_tokens
    mean = total_nll / max(total_tokens, 1)
    return mean, math.exp(min(mean, 100.0))


def log_attention_maps(
    log: RunLog,
    step: int,
    model: Seq2SeqModel,
    data: PreparedData,
    sources: list[str],
    hypotheses: list[list[int]],
    device: torch.device,
) -> None:
    """Cross-attention of the model's own translations of a few fixed valid sentences.

    The weights come from teacher-forcing each hypothesis, so every target piece (and the final
    </s>) has its row. Images: the average over heads, and each head on its own.
    """
    for n, (source, hyp) in enumerate(zip(sources, hypotheses, strict=True)):
        src_ids = data.src_tokenizer.encode([source])[0] + [EOS_ID]
        src = torch.tensor([src_ids], device=device)
        tgt_in = torch.tensor([[BOS_ID, *hyp]], device=device)
        weights = model.cross_attention(src, torch.tensor([len(src_ids)], device=device), tgt_in)
        weights = weights[0].float().cpu()  # (H, T, S)
        src_pieces = [data.src_tokenizer.id_to_piece(i) for i in src_ids]
        tgt_pieces = [data.tgt_tokenizer.id_to_piece(i) for i in [*hyp, EOS_ID]]
        title = f"valid sentence {n}, step {step}"
        log.figure(
            step,
            f"attention/sentence{n}/mean",
            attention_figure(weights.mean(0), src_pieces, tgt_pieces, f"{title}, mean of heads"),
        )
        if weights.shape[0] > 1:
            for head, head_weights in enumerate(weights):
                log.figure(
                    step,
                    f"attention/sentence{n}/head{head}",
                    attention_figure(head_weights, src_pieces, tgt_pieces, f"{title}, head {head}"),
                )


@torch.no_grad()
def validate(
    cfg: Config,
    model: Seq2SeqModel,
    data: PreparedData,
    valid_set: ParallelDataset,
    valid_lines: tuple[list[str], list[str]],
    device: torch.device,
    dtype,
    log: RunLog,
    step: int,
) -> dict[str, float]:
    """Valid loss and perplexity, BLEU and chrF of decoded output, maps and samples."""
    model.eval()
    nll, ppl = valid_loss(model, valid_set, cfg.train.max_tokens, device, dtype)
    sources, references = valid_lines
    translator = Translator(model, data.src_tokenizer, data.tgt_tokenizer, cfg.decode, device)
    with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=bool(dtype)):
        result = evaluate(translator, sources, references, beam_size=cfg.decode.valid_beam_size)
    metrics = {
        "valid/nll": nll,
        "valid/ppl": ppl,
        "valid/bleu": result.bleu,
        "valid/chrf": result.chrf,
    }
    log.scalars(step, {**metrics, "valid/sentences_per_second": result.sentences_per_second})
    shown = min(cfg.train.attention_samples, len(sources))
    samples = "\n\n".join(
        f"**source:** {sources[i]}  \n**reference:** {references[i]}  \n"
        f"**model:** {result.hypotheses[i]}"
        for i in range(shown)
    )
    log.text(step, "samples", samples)
    if shown:
        hypothesis_ids = result.hypothesis_ids[:shown]
        log_attention_maps(log, step, model, data, sources[:shown], hypothesis_ids, device)
    log.line(
        f"validation step {step}: nll {nll:.4f} ppl {ppl:.2f} BLEU {result.bleu:.2f} "
        f"chrF {result.chrf:.2f} ({result.sentences} sentences, {result.seconds:.1f}s)"
    )
    model.train()
    return metrics


# ---------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------


def training_checkpoint(
    cfg: Config,
    raw_model: Seq2SeqModel,
    data: PreparedData,
    optimizer,
    scheduler,
    scaler,
    progress: Progress,
    rng_states: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "format": CHECKPOINT_FORMAT,
        "config": cfg.to_dict(),
        "model": raw_model.state_dict(),
        "tokenizers": tokenizer_entry(data.src_tokenizer, data.tgt_tokenizer),
        "step": progress.step,
        "training": {
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "scaler": scaler.state_dict(),
            "progress": asdict(progress),
            "rng": rng_states,  # one entry per rank
        },
    }


def weights_are_finite(model: torch.nn.Module) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


def check_resumable(saved: Config, cfg: Config, path: Path) -> None:
    """A run folder can only be resumed with the same model and data."""
    for section in ("model", "data"):
        if asdict(getattr(saved, section)) != asdict(getattr(cfg, section)):
            raise UserError(
                f"{path}: this run folder holds a run with a different [{section}] configuration;"
                " choose another train.run_name (or train.run_dir)"
            )


# ---------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------


def run_dir_of(cfg: Config) -> Path:
    return Path(cfg.train.run_dir or f"checkpoints/{cfg.train.run_name}")


def train(cfg: Config, prepare_missing: bool = False) -> Progress:
    """Train (or resume) the run described by `cfg`; returns where training ended."""
    device = pick_device(cfg.train.device, "train.device")
    env = distributed.init_distributed(device.type)
    try:
        progress = _train(cfg, prepare_missing, device, env)
        # Rank 0 may still be validating and saving: tear the group down only when all are done.
        distributed.barrier(env)
        return progress
    finally:
        distributed.shutdown(env)


def _train(
    cfg: Config, prepare_missing: bool, device: torch.device, env: distributed.Dist
) -> Progress:
    if env.enabled and device.type == "cuda":
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
    dtype = autocast_dtype(cfg.train.precision, device)
    decode_dtype(cfg.decode.precision, device)  # a bad one fails now, not at the first validation
    run_dir = run_dir_of(cfg)
    last_path, best_path = run_dir / "last.pt", run_dir / "best.pt"

    data = load_data(cfg, prepare_missing, env)
    train_set, valid_set = data.dataset("train"), data.dataset("valid")
    valid_lines = data.lines("valid")
    if cfg.train.valid_max_sentences:
        valid_lines = tuple(side[: cfg.train.valid_max_sentences] for side in valid_lines)

    seed_everything(cfg.train.seed)
    raw_model = build_model(
        cfg.model,
        data.src_tokenizer.vocab_size,
        data.tgt_tokenizer.vocab_size,
        data.joint,
        verbose=env.is_main,
    ).to(device)
    optimizer = torch.optim.AdamW(
        raw_model.parameters(),
        lr=cfg.train.lr,
        betas=cfg.train.optimizer_betas,
        weight_decay=cfg.train.weight_decay,
    )
    scheduler = make_scheduler(cfg, optimizer)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    progress = Progress()

    resumed = last_path.is_file()
    if resumed:
        checkpoint = load_checkpoint(last_path, map_location=device)
        check_resumable(config_from_dict(checkpoint["config"]), cfg, last_path)
        raw_model.load_state_dict(checkpoint["model"])
        state = checkpoint["training"]
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        progress = Progress(**state["progress"])
        rng_states = state["rng"]
        set_rng_state(rng_states[env.rank] if env.rank < len(rng_states) else rng_states[0])
    elif env.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.toml").write_text(dump_toml(cfg.to_dict()), encoding="utf-8")
    distributed.barrier(env)

    model: torch.nn.Module = raw_model
    if cfg.train.compile:
        model = torch.compile(model)
    if env.enabled:
        model = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )

    log = RunLog(run_dir, env.is_main, purge_step=progress.step + 1 if resumed else None)
    log.line(
        ("resumed from " + str(last_path) + f" at step {progress.step}, epoch {progress.epoch}")
        if resumed
        else f"run {run_dir}: {raw_model.num_parameters():,} parameters on {device}"
        f" ({'fp32' if dtype is None else dtype}), world size {env.world_size}"
    )
    if dtype == torch.bfloat16 and device.type == "cpu" and not cpu_has_fast_bf16():
        log.line(
            "warning: this CPU has no AVX-512, so bf16 matrix products run on slow fallback "
            "kernels (9-19x slower than fp32 on such a machine); train.precision=fp32 is faster"
        )

    sampler = TokenBatchSampler(
        train_set.src_lens,
        train_set.tgt_lens,
        cfg.train.max_tokens,
        shuffle=True,
        seed=cfg.train.seed,
        num_replicas=env.world_size,
        rank=env.rank,
    )

    def save(path: Path) -> None:
        states = distributed.gather_objects(rng_state(), env)
        if not env.is_main:
            return
        if not weights_are_finite(raw_model):
            raise TrainingDiverged(f"step {progress.step}: weights are not finite; not saving")
        save_checkpoint(
            training_checkpoint(
                cfg, raw_model, data, optimizer, scheduler, scaler, progress, states
            ),
            path,
        )

    def run_validation() -> bool:
        """Validate on rank 0, save checkpoints; returns True when training should stop."""
        stop = False
        if env.is_main:
            metrics = validate(
                cfg, raw_model, data, valid_set, valid_lines, device, dtype, log, progress.step
            )
            bleu = metrics["valid/bleu"]
            progress.history.append({"step": progress.step, **metrics})
            if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
                scheduler.step(bleu)
            improved = bleu > progress.best_bleu
            if improved:
                progress.best_bleu, progress.best_step = bleu, progress.step
                progress.validations_without_improvement = 0
            else:
                progress.validations_without_improvement += 1
            patience = cfg.train.patience
            stop = bool(patience and progress.validations_without_improvement >= patience)
            if stop:
                log.line(f"early stop: no BLEU improvement in {patience} validations")
        progress_state = distributed.broadcast_object(asdict(progress), env)
        progress.__dict__.update(progress_state)
        stop = distributed.broadcast_object(stop, env)
        if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            scheduler.load_state_dict(distributed.broadcast_object(scheduler.state_dict(), env))
        save(last_path)
        if env.is_main:
            if progress.best_step == progress.step:
                copy_checkpoint(last_path, best_path)
            if cfg.train.keep_last:
                keep_step_checkpoint(run_dir, last_path, progress.step, cfg.train.keep_last)
            log.flush()
        return stop

    model.train()
    max_steps = cfg.train.max_steps
    bar = tqdm(
        total=max_steps or None,
        initial=progress.step,
        disable=None if env.is_main else True,
        unit="step",
        dynamic_ncols=True,
    )
    window = Window()
    consecutive_bad = 0
    last_validated = progress.step if resumed else -1
    stop = False
    while not stop and progress.epoch < cfg.train.max_epochs:
        sampler.load_state_dict({"epoch": progress.epoch, "position": progress.position})
        batches = iter(make_loader(train_set, sampler, cfg.train.num_workers))
        while not stop:
            group = [b.to(device) for b in islice(batches, cfg.train.accum_steps)]
            if not group:
                break
            progress.position += len(group)

            # One update: gradients of sum(loss) / (target tokens in the group, all ranks).
            num_tokens = distributed.all_reduce_sum(
                torch.tensor(float(sum(b.num_tgt_tokens for b in group)), device=device), env
            )
            loss_sum = torch.zeros((), device=device)
            nll_sum = torch.zeros((), device=device)
            optimizer.zero_grad(set_to_none=True)
            for i, batch in enumerate(group):
                last_micro = i == len(group) - 1
                sync = model.no_sync() if env.enabled and not last_micro else nullcontext()
                with sync:
                    loss, nll = token_losses(model, batch, cfg.train.label_smoothing, dtype)
                    scaler.scale(loss * env.world_size / num_tokens).backward()
                loss_sum += loss.detach()
                nll_sum += nll
            totals = distributed.all_reduce_sum(torch.stack([loss_sum, nll_sum]), env)
            loss_value, nll_value = (totals / num_tokens).tolist()

            scaler.unscale_(optimizer)
            grad_norm = torch.nn.utils.clip_grad_norm_(
                raw_model.parameters(), cfg.train.clip_norm or float("inf")
            )
            finite = math.isfinite(loss_value) and (
                scaler.is_enabled() or bool(torch.isfinite(grad_norm))
            )
            if not finite:
                optimizer.zero_grad(set_to_none=True)
                scaler.update()
                progress.skipped_steps += 1
                consecutive_bad += 1
                log.line(f"step {progress.step}: non-finite loss or gradient, update skipped")
                if consecutive_bad >= cfg.train.max_bad_steps:
                    raise TrainingDiverged(
                        f"training diverged: {consecutive_bad} consecutive non-finite steps at "
                        f"step {progress.step}; lower train.lr or check the data"
                    )
                continue
            consecutive_bad = 0
            scaler.step(optimizer)
            scaler.update()
            if not isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
                scheduler.step()
            progress.step += 1
            bar.update(1)

            step_tgt = int(num_tokens.item())
            step_src = sum(b.num_src_tokens for b in group) * env.world_size
            window.add(loss_value, nll_value, step_tgt, step_src)
            lr = optimizer.param_groups[0]["lr"]
            if progress.step % cfg.train.log_every == 0:
                loss_mean, nll_mean = window.loss / window.tgt, window.nll / window.tgt
                seconds = time.perf_counter() - window.start
                tgt_per_s = window.tgt / seconds
                log.scalars(
                    progress.step,
                    {
                        "train/loss": loss_mean,
                        "train/nll": nll_mean,
                        "train/ppl": math.exp(min(nll_mean, 100.0)),
                        "train/lr": lr,
                        "train/grad_norm": float(grad_norm),
                        "train/tgt_tokens_per_second": tgt_per_s,
                        "train/tokens_per_second": (window.tgt + window.src) / seconds,
                        "train/epoch": progress.epoch,
                    },
                )
                log.line(
                    f"step {progress.step} epoch {progress.epoch} loss {loss_mean:.4f} "
                    f"nll {nll_mean:.4f} lr {lr:.3g} |g| {float(grad_norm):.3g} "
                    f"{tgt_per_s:,.0f} tgt tok/s"
                )
                window = Window()
            bar.set_postfix(loss=f"{loss_value:.3f}", lr=f"{lr:.2e}", refresh=False)

            reached_max = bool(max_steps and progress.step >= max_steps)
            paused = time.perf_counter()  # validation and saving do not count towards tokens/s
            if progress.step % cfg.train.valid_every == 0 or reached_max:
                stop = run_validation() or reached_max
                last_validated = progress.step
            elif cfg.train.save_every and progress.step % cfg.train.save_every == 0:
                save(last_path)
            window.start += time.perf_counter() - paused
        if not stop:
            progress.epoch += 1
            progress.position = 0
    bar.close()
    if last_validated != progress.step:
        run_validation()
    log.line(
        f"done at step {progress.step}, epoch {progress.epoch}: best valid BLEU "
        f"{progress.best_bleu:.2f} at step {progress.best_step} ({best_path})"
    )
    log.close()
    return progress


def keep_step_checkpoint(run_dir: Path, last_path: Path, step: int, keep: int) -> None:
    """Copy last.pt to step-<N>.pt and delete all but the newest `keep` of those."""
    copy_checkpoint(last_path, run_dir / f"step-{step}.pt")
    old = sorted(run_dir.glob("step-*.pt"), key=lambda p: int(p.stem.split("-")[1]))
    for path in old[:-keep]:
        path.unlink()
