"""Sinusoidal positional encoding (Vaswani et al., 2017).

Attention itself ignores order, so each position p adds a fixed vector to its embedding:

    PE(p, 2i)   = sin(p / 10000^(2i / D))
    PE(p, 2i+1) = cos(p / 10000^(2i / D))

Every dimension pair is a sinusoid of its own wavelength (2 pi up to 10000 * 2 pi), and
PE(p + k) is a linear function of PE(p), so relative offsets are easy to attend to.
"""

import torch
from torch import Tensor, nn


class PositionalEncoding(nn.Module):
    """Maps positions to their encodings, computed from the formula for any position.

    There is no table and so no maximum length: a sentence longer than any seen in training
    gets its encodings like any other. Computing sin/cos on demand costs far less than one
    attention layer, and is done in float32 whatever the model's precision, because angles
    at large positions need it.
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, positions: Tensor) -> Tensor:
        """positions (...) integer positions -> encodings (..., D) in float32.

        Teacher forcing passes `torch.arange(T)` (one row, broadcast over the batch);
        incremental decoding passes each row's current step.
        """
        two_i = torch.arange(0, self.dim, 2, dtype=torch.float32, device=positions.device)
        angles = positions.float().unsqueeze(-1) / 10000.0 ** (two_i / self.dim)
        # Interleave: sin in even dimensions, cos in odd ones.
        encodings = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)
        return encodings[..., : self.dim]
