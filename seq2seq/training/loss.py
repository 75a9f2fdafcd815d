"""The training loss: label-smoothed cross-entropy over the target tokens, padding ignored.

With label smoothing e and a vocabulary of V tokens, the target distribution of a position
whose reference token is y is q = (1 - e) onehot(y) + e / V, and the loss is the cross-entropy

    loss = -sum_v q_v log p_v = (1 - e) * nll + e * mean_v(-log p_v),    nll = -log p_y

with p = softmax(z) of the logits z (the definition of `F.cross_entropy(label_smoothing=e)`).
Its gradient with respect to the logits is simply

    dloss / dz = p - q

Training computes it with this function, or, for a model's fast twin (seq2seq.fast), with the
same computed with its gradient written by hand (`seq2seq.training.run.cross_entropy_of` picks).
"""

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from seq2seq.data.batching import Batch
from seq2seq.data.specials import PAD_ID

# A loss function: (logits (N, V), target (N,), smoothing) -> (summed loss, summed NLL)
CrossEntropy = Callable[[Tensor, Tensor, float], tuple[Tensor, Tensor]]


def label_smoothed_cross_entropy(
    logits: Tensor, target: Tensor, smoothing: float
) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed loss and summed NLL (no gradient) over the non-PAD targets.

    logits: (N, V) float; target: (N,) token ids, PAD_ID where there is nothing to predict;
    smoothing: e in [0, 1). Divide both by the number of non-PAD targets for means.
    """
    loss = F.cross_entropy(
        logits, target, ignore_index=PAD_ID, label_smoothing=smoothing, reduction="sum"
    )
    with torch.no_grad():
        nll = F.cross_entropy(logits, target, ignore_index=PAD_ID, reduction="sum")
    return loss, nll


def token_losses(
    model: torch.nn.Module,
    batch: Batch,
    label_smoothing: float,
    dtype: torch.dtype | None,
    cross_entropy: CrossEntropy = label_smoothed_cross_entropy,
) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed loss and summed plain NLL over the batch's target tokens, from the
    model's teacher-forced logits (under autocast in `dtype`; None: fp32). Padding positions are
    ignored. Both are float32 scalars; divide by the token count. `cross_entropy` computes them
    from the logits: `seq2seq.training.run.cross_entropy_of(m)` of the model `m` that `model` runs
    (`model` may be `m` compiled or wrapped in DistributedDataParallel)."""
    with torch.autocast(batch.src.device.type, dtype=dtype or torch.float32, enabled=bool(dtype)):
        logits = model(batch.src, batch.src_lens, batch.tgt_in)
    return cross_entropy(logits.float().flatten(0, 1), batch.tgt_out.flatten(), label_smoothing)
