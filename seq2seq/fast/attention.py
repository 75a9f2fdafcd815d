"""Multi-head attention for decoding many beams over a shared source, and the fused kernel.

`seq2seq.models.attention.MultiHeadAttention.attend` computes, for every row of its batch,
softmax(q k^T / sqrt(d)) v with the explicit operations. `BeamGroupedAttention.attend` gives the
same result with two changes that pay in decoding and training:

- Beam search keeps the encoder state once per sentence and the decoder cache once per beam, so
  the K beams of a sentence (K consecutive query rows) read one copy of its keys/values. They are
  regrouped into one (K * Q)-query attention per sentence and head: no copy of the keys/values
  per beam, one larger matrix product instead of K small ones.
- PyTorch's fused kernel (`F.scaled_dot_product_attention`) runs where it is faster, on CUDA
  (no (Q, K) weight matrix in memory); on a CPU the explicit operations are faster for these
  models (docs/benchmarks.md), so they stay. When no gradient is needed (decoding), they run as
  `inference_attention`: the same operations on three-dimensional views, masked and scaled in
  place, with the heads merged in the same reshape that ungroups the beams. Decoding one
  sentence is a few hundred small operations per step, each costing more to call than to
  compute, so one fewer copy or call per attention shows.
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from seq2seq.models.attention import MultiHeadAttention, padding_mask


def fused_kernel_pays(device: torch.device) -> bool:
    """Whether PyTorch's fused attention kernel beats the explicit operations on `device`: on
    CUDA it does; on a CPU it did not in any case measured (docs/benchmarks.md)."""
    return device.type == "cuda"


# The fused kernels that need no preparation per shape. cuDNN's attention, which PyTorch may
# prefer on recent GPUs, builds an execution plan for every new shape of its inputs, and that
# costs more than the attention itself where shapes keep changing: a decoding step's keys grow
# by one, and batches of a corpus come in many lengths.
SHAPE_FREE_KERNELS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def fused_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout: float) -> Tensor:
    """The same maths as `DotProductAttention` through PyTorch's fused kernel (no weights),
    one of `SHAPE_FREE_KERNELS`.

    q (B, H, Q, d), k and v (B, H, K, d), mask broadcastable to (B, H, Q, K) -> (B, H, Q, d).
    Some kernels return NaN for a query with no valid key; such rows are given every key to
    keep the kernel finite, then their output is set to zero, as `masked_softmax` does.
    """
    with sdpa_kernel(SHAPE_FREE_KERNELS):
        if mask is None:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout)
        has_key = mask.any(dim=-1, keepdim=True)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | ~has_key, dropout_p=dropout)
    return out.masked_fill(~has_key, 0.0)


def inference_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    """softmax(q k^T / sqrt(d)) v as `DotProductAttention` computes it, for G query rows per
    key row, with the heads merged; no gradient, no dropout, no weights returned.

    q (B * G, H, Q, d); k, v (B, H, K, d); mask None or boolean, broadcastable to
    (B, H, G * Q, K) (with G > 1 a padding mask (B, 1, 1, K)). Returns (B * G, Q, H * d).
    """
    batch, heads, keys, head_dim = k.shape
    groups, queries = q.shape[0] // batch, q.shape[2]
    rows = groups * queries  # the query rows that read one sentence's keys, per head
    q = q.unflatten(0, (batch, groups)).transpose(1, 2).reshape(batch * heads, rows, head_dim)
    # k^T laid out as `torch.matmul` lays it out for the plain code: the same sums, bit for bit
    scores = torch.bmm(q, k.transpose(2, 3).reshape(batch * heads, head_dim, keys))
    scores = scores.view(batch, heads, rows, keys).div_(math.sqrt(head_dim))
    if mask is not None:
        blocked = ~mask
        scores.masked_fill_(blocked, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:  # a row with no key to attend is zeros, as in `masked_softmax`
        weights.masked_fill_(blocked, 0.0)
    context = torch.bmm(weights.view(batch * heads, rows, keys), v.reshape(-1, keys, head_dim))
    context = context.view(batch, heads, groups, queries, head_dim).permute(0, 2, 3, 1, 4)
    return context.reshape(batch * groups, queries, heads * head_dim)


class BeamGroupedAttention(MultiHeadAttention):
    """`MultiHeadAttention` whose queries may come in groups of G rows per key row (G beams of a
    sentence over its one copy of the source), on the fused kernel where it pays."""

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """As `MultiHeadAttention.attend`, but q may have G rows per row of k and v.

        q: (B * G, H, Q, d); k, v: (B, H, K, d); with G > 1 the mask must be the same for every
        query (a padding mask). Returns output (B * G, Q, D) and weights (B * G, H, Q, K) or
        None. The weights come from the explicit operations; without them the fused kernel
        runs where it is faster (`fused_kernel_pays`), with the same result, and elsewhere
        `inference_attention` when no gradient is needed.
        """
        if mask is not None and mask.dtype != torch.bool:
            mask = padding_mask(mask, k.shape[-2])
        decoding = not (need_weights or self.training or torch.is_grad_enabled())
        if decoding and not fused_kernel_pays(q.device):
            return self.out_proj(inference_attention(q, k, v, mask)), None
        groups = q.shape[0] // k.shape[0]
        if groups > 1:  # (B * G, H, Q, d) -> (B, H, G * Q, d)
            q = q.unflatten(0, (-1, groups)).transpose(1, 2).flatten(2, 3)
        if need_weights or not fused_kernel_pays(q.device):
            context, weights = self.attention(q, k, v, mask)
        else:
            dropout = self.attention.dropout.p if self.training else 0.0
            context, weights = fused_attention(q, k, v, mask, dropout), None
        out = self.out_proj(self.merge_heads(context))
        if groups > 1:  # (B, G * Q, D) -> (B * G, Q, D); weights (B, H, G * Q, K) likewise
            out = out.unflatten(1, (groups, -1)).flatten(0, 1)
            if weights is not None:
                weights = weights.unflatten(2, (groups, -1)).transpose(1, 2).flatten(0, 1)
        return out, weights
