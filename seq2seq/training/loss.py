"""The training loss: label-smoothed cross-entropy over the target tokens, padding ignored.

With label smoothing e and a vocabulary of V tokens, the target distribution of a position
whose reference token is y is q = (1 - e) onehot(y) + e / V, and the loss is the cross-entropy

    loss = -sum_v q_v log p_v = (1 - e) * nll + e * mean_v(-log p_v),    nll = -log p_y

with p = softmax(z) of the logits z (the definition of `F.cross_entropy(label_smoothing=e)`).
Its gradient with respect to the logits is simply

    dloss / dz = p - q

Training computes it with this function, or, for a model's fast twin (seq2seq.fast), with the
same computed with its gradient written by hand (`seq2seq.training.run.cross_entropy_of` picks).

With an alignment head (train.alignment_weight > 0; Garg et al. 2019), one cross-attention
head a(t, s) (layer and head train.alignment_head) learns a teacher's word alignment
(seq2seq.data.align_teacher). Its links, normalised over the source pieces, give each target
piece t a distribution q(t, s), and the head pays their cross-entropy

    alignment = 1/|L| sum_{t in L} -sum_s q(t, s) log a(t, s)

over the set L of target pieces that have links, a(t, s) read at the position that predicts
piece t. The training objective is loss / (target tokens) + alignment_weight * alignment.
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


def alignment_loss(attention: Tensor, links: Tensor) -> Tensor:
    """The alignment head's mean cross-entropy to the teacher's links (module docstring).

    attention: (B, T, S) float, the head's weights, row t the position that predicts target
    piece t; links: (K, 3) long, one (batch row, target piece, source piece) per link. A float32
    scalar, 0 when no piece has a link. A weight of 0 (a padded source piece) counts as 1e-9.
    """
    q = torch.zeros_like(attention)
    q[links[:, 0], links[:, 1], links[:, 2]] = 1.0
    links_per_piece = q.sum(dim=-1, keepdim=True)
    q = q / links_per_piece.clamp(min=1.0)
    cross_entropy = -(q * attention.clamp(min=1e-9).log()).sum(dim=-1)  # (B, T): 0 where no link
    return cross_entropy.sum() / (links_per_piece > 0).sum().clamp(min=1)


def token_losses(
    model: torch.nn.Module,
    batch: Batch,
    label_smoothing: float,
    dtype: torch.dtype | None,
    cross_entropy: CrossEntropy = label_smoothed_cross_entropy,
    alignment_head: tuple[int, int] | None = None,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Summed label-smoothed loss and summed plain NLL over the batch's target tokens, from the
    model's teacher-forced logits (under autocast in `dtype`; None: fp32). Padding positions are
    ignored. Both are float32 scalars; divide by the token count. `cross_entropy` computes them
    from the logits: `seq2seq.training.run.cross_entropy_of(m)` of the model `m` that `model` runs
    (`model` may be `m` compiled or wrapped in DistributedDataParallel). Third, with
    `alignment_head` (layer, head), that head's `alignment_loss` to the batch's links; else None."""
    head = {} if alignment_head is None else {"alignment_head": alignment_head}
    with torch.autocast(batch.src.device.type, dtype=dtype or torch.float32, enabled=bool(dtype)):
        output = model(batch.src, batch.src_lens, batch.tgt_in, **head)
    logits, attention = output if head else (output, None)
    target = batch.tgt_out.flatten()
    loss, nll = cross_entropy(logits.float().flatten(0, 1), target, label_smoothing)
    if attention is None:
        return loss, nll, None
    return loss, nll, alignment_loss(attention.float(), batch.links)
