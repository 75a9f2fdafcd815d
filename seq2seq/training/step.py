"""One training step, as every device runs it: the gradients of a group of batches, clipped,
then an AdamW update and a step of the learning-rate schedule. The loop that calls it is
seq2seq/training/loop.py; the loss it takes is seq2seq/training/loss.py."""

import math
from typing import NamedTuple

import torch
from torch import Tensor

from seq2seq.config import trained_alignment_head
from seq2seq.data.batching import Batch
from seq2seq.training import distributed
from seq2seq.training.loss import token_losses
from seq2seq.training.run import Run


class Update(NamedTuple):
    """One optimizer update. Its figures stay on the device that computed them until a log line
    reads them all at once (`Window.settle`): reading a GPU tensor makes the host wait for the
    GPU, and a wait in every step leaves the GPU idle while the host prepares the next one."""

    step: int  # the step number the update takes
    means: Tensor  # (3,) float32: mean loss and NLL per target token, over all ranks, and the
    # mean alignment loss of the group's batches (0 without train.alignment_weight)
    grad_norm: Tensor  # () float32: the gradient norm before clipping
    applied: Tensor | None  # () bool: False when the device skipped it; None: the host checked
    tgt_tokens: Tensor  # () float32: target tokens, all ranks
    src_tokens: int  # source tokens, all ranks

    def figures(self) -> Tensor:
        """(6,) float32 on the device: mean loss, mean NLL, mean alignment loss, gradient norm,
        target tokens, and 1 when the update was applied, else 0."""
        applied = torch.ones_like(self.grad_norm) if self.applied is None else self.applied
        return torch.stack([*self.means, self.grad_norm, self.tgt_tokens, applied.float()])


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
    sums = torch.zeros(3, device=run.device)  # loss, nll, alignment (see below)
    head = trained_alignment_head(run.cfg)
    run.optimizer.zero_grad(set_to_none=True)
    for i, batch in enumerate(group):
        with distributed.sync_gradients(model, env, i == len(group) - 1):
            loss, nll, alignment = token_losses(
                model, batch, run.cfg.train.label_smoothing, run.dtype, run.cross_entropy, head
            )
            objective = loss * env.world_size / num_tokens
            if alignment is not None:  # a mean per batch: the group's mean
                objective = objective + run.cfg.train.alignment_weight * alignment / len(group)
            run.scaler.scale(objective).backward()
        sums[:2] += torch.stack([loss.detach(), nll])
        if alignment is not None:  # weighted so that the division by num_tokens below leaves
            # its mean over the group's batches and the ranks
            sums[2] += alignment.detach() * num_tokens / (env.world_size * len(group))
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
