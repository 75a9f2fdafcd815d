"""Attention building blocks, following the maths.

Attention pools values by weights that say how well each key matches a query:

    attention(q, K, V) = sum_i softmax(score(q, k_i)) v_i

Everything below is a choice of `score` plus masking of positions that must not be attended
(padding, or the future in a decoder).
"""

import torch
from torch import Tensor


def masked_softmax(scores: Tensor, valid: Tensor | None) -> Tensor:
    """Softmax over the last axis that gives exactly zero weight to masked positions.

    Args:
        scores: (batch, ..., keys) attention scores.
        valid: which keys may be attended, one of
            - None: every key;
            - valid lengths of shape (batch,): keys [0, len) of every query row are valid;
            - valid lengths of shape (batch, queries): one length per query row
              (scores must then be (batch, queries, keys) or (batch, heads, queries, keys));
            - a boolean mask broadcastable to `scores`, True where a key may be attended.

    Returns:
        weights of the same shape as `scores`; each row sums to 1 over its valid keys, masked
        keys get exactly 0, and a row with no valid key is all zeros (never NaN).
    """
    if valid is None:
        return torch.softmax(scores, dim=-1)
    if valid.dtype == torch.bool:
        mask = valid
    else:
        positions = torch.arange(scores.shape[-1], device=scores.device)
        lens = valid
        if lens.dim() == 1:  # (batch,) -> (batch, 1, ..., 1, 1)
            lens = lens.view(-1, *([1] * (scores.dim() - 1)))
        else:  # (batch, queries) -> (batch, 1, ..., queries, 1)
            lens = lens.view(lens.shape[0], *([1] * (scores.dim() - 3)), lens.shape[1], 1)
        mask = positions < lens
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    # A fully masked row is softmax over all -inf, which is NaN: make it zeros instead.
    return weights.masked_fill(~mask, 0.0)
