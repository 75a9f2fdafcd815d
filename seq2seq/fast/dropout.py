"""Inverted dropout with a random mask that is cheap to draw on a CPU.

    dropout(x) = x * keep / (1 - p),    keep ~ Bernoulli(1 - p) per element

`nn.Dropout` on a CPU draws one Bernoulli sample per element (aten::bernoulli_), one at a time
from the CPU generator. Here one 64-bit random integer gives the mask of four elements: each
16-bit slice, masked to 15 bits, is uniform on [0, 2^15), and the element is kept where it is at
least p * 2^15. That is the same distribution with p rounded to a multiple of 2^-15 (the scale
uses the rounded p, so the expectation is exactly x), at about half the cost of dropout, forward
and backward (docs/benchmarks.md). On GPUs PyTorch's fused dropout is already fast and is used
unchanged.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_BITS = 15  # random bits per element


def keep_mask(shape: torch.Size, p: float) -> tuple[Tensor, float]:
    """A CPU boolean mask of `shape`, True with probability 1 - p (p rounded to a multiple of
    2^-15), and the scale 1 / (1 - p) that keeps the expectation of the kept values."""
    numel = shape.numel()
    threshold = round(p * 2**_BITS)
    words = torch.empty((numel + 3) // 4, dtype=torch.int64).random_()  # 63 random bits each
    uniform = words.view(torch.int16)[:numel].view(shape) & (2**_BITS - 1)
    return uniform >= threshold, 2**_BITS / (2**_BITS - threshold)


def packed_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Zero each element of x with probability p and scale the rest by 1 / (1 - p) while
    training; x unchanged otherwise."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or round(p * 2**_BITS) == 2**_BITS:
        return F.dropout(x, p, training=True)
    keep, scale = keep_mask(x.shape, p)
    return x * keep * scale


class PackedDropout(nn.Dropout):
    """`nn.Dropout` drawing its mask with `packed_dropout`."""

    def forward(self, x: Tensor) -> Tensor:
        return packed_dropout(x, self.p, self.training)
