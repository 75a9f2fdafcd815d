"""Label-smoothed cross-entropy with its gradient written by hand.

The loss (seq2seq.training.loss) is

    loss = (1 - e) * nll + e * mean_v(-log p_v),    nll = -log p_y,    p = softmax(z)

and its gradient with respect to the logits z is simply p - q, with q = (1 - e) onehot(y) + e / V
the smoothed target. The function below computes the loss and the plain NLL from one
log-softmax and writes that gradient directly in backward, instead of autograd through
`F.cross_entropy` plus a second pass for the NLL: faster on a CPU (docs/benchmarks.md).
"""

import torch
from torch import Tensor

from seq2seq.data.specials import PAD_ID


class _LabelSmoothedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
        log_probs = logits.log_softmax(dim=-1)  # (N, V)
        padding = target == PAD_ID
        nll = -log_probs.gather(1, target[:, None]).squeeze(1).masked_fill(padding, 0.0)
        uniform = -log_probs.mean(dim=1).masked_fill(padding, 0.0)
        ctx.save_for_backward(log_probs, target, padding)
        ctx.smoothing = smoothing
        nll_sum = nll.sum()
        ctx.mark_non_differentiable(nll_sum)
        return (1.0 - smoothing) * nll_sum + smoothing * uniform.sum(), nll_sum

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor, None, None]:
        log_probs, target, padding = ctx.saved_tensors
        smoothing = ctx.smoothing
        grad = log_probs.exp()  # p
        grad -= smoothing / grad.shape[1]  # - e / V
        grad[torch.arange(len(target), device=grad.device), target] -= 1.0 - smoothing
        grad.masked_fill_(padding[:, None], 0.0)
        return grad.mul_(grad_loss), None, None


def label_smoothed_cross_entropy(
    logits: Tensor, target: Tensor, smoothing: float
) -> tuple[Tensor, Tensor]:
    """The same as `seq2seq.training.loss.label_smoothed_cross_entropy`: summed label-smoothed loss
    and summed NLL (no gradient) over the non-PAD targets of logits (N, V) and target (N,)."""
    return _LabelSmoothedCrossEntropy.apply(logits, target, smoothing)
