"""Attention building blocks, following the maths.

Attention pools values by weights that say how well each key matches a query:

    attention(q, K, V) = sum_i softmax_i(score(q, k_i)) v_i

Everything below is a choice of `score` plus masking of positions that must not be attended
(padding, or the future in a decoder):

    nadaraya_watson        score(x, x_i) = -((x - x_i) w)^2 / 2            (Nadaraya, 1964)
    AdditiveAttention      score(q, k) = w_v^T tanh(W_q q + W_k k)        (Bahdanau et al., 2015)
    DotProductAttention    score(q, k) = q^T k / sqrt(d)                   (Vaswani et al., 2017)
    MultiHeadAttention     H dot-product attentions over learned projections, concatenated

Masks are boolean and True where a key may be attended. Shapes: B = batch, Q = queries,
K = keys (source or target positions), H = heads, D = model size, d = D / H per head.
"""

import math

import torch
from torch import Tensor, nn


def padding_mask(valid_lens: Tensor, num_keys: int) -> Tensor:
    """(B,) valid lengths -> (B, 1, 1, K) mask, True at keys [0, len) of each row.

    The shape broadcasts over heads and queries of (B, H, Q, K) scores.
    """
    positions = torch.arange(num_keys, device=valid_lens.device)
    return (positions < valid_lens[:, None])[:, None, None, :]


def causal_mask(length: int, device: torch.device | str | None = None) -> Tensor:
    """(T, T) mask, True where key j <= query i: position i sees itself and its past only."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()


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


def nadaraya_watson(
    queries: Tensor, keys: Tensor, values: Tensor, w: Tensor, valid: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Nadaraya-Watson kernel regression: attention before neural networks.

    To predict a value at the query x, average the training values y_i, weighting each by how
    close its input x_i (the key) is to x under a Gaussian kernel:

        f(x) = sum_i softmax_i(-((x - x_i) w)^2 / 2) y_i

    Args:
        queries: (Q,) the inputs x to predict at.
        keys: (K,) the training inputs x_i.
        values: (K,) the training values y_i.
        w: (1,) one kernel scale for every key, or (K,) one per key; a larger w is a narrower
            kernel.
        valid: None, or a (Q, K) boolean mask, True where a query may attend a key.

    Returns:
        the (Q,) pooled values f(x) and the (Q, K) attention weights, each row summing to 1
        over its valid keys.
    """
    scores = -(((queries[:, None] - keys[None, :]) * w) ** 2) / 2  # (Q, K)
    weights = masked_softmax(scores, valid)
    return weights @ values, weights


class AdditiveAttention(nn.Module):
    """Bahdanau attention: score(q, k) = w_v^T tanh(W_q q + W_k k).

    The keys do not change while a sentence is decoded, so `W_k k` is computed once per source
    batch by `project_keys` and passed to every decoder step; only `W_q q` is new at each step.
    """

    def __init__(
        self, query_size: int, key_size: int, attention_size: int, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.query_proj = nn.Linear(query_size, attention_size, bias=False)  # W_q
        self.key_proj = nn.Linear(key_size, attention_size, bias=False)  # W_k
        self.score_proj = nn.Linear(attention_size, 1, bias=False)  # w_v
        self.dropout = nn.Dropout(dropout)

    def project_keys(self, keys: Tensor) -> Tensor:
        """(B, S, key_size) -> (B, S, A): W_k k for every key, once per source batch."""
        return self.key_proj(keys)

    def score(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        """query (B, Q, query_size), projected_keys (B, S, A) -> scores (B, Q, S)."""
        # (B, Q, 1, A) + (B, 1, S, A) -> (B, Q, S, A) -> (B, Q, S)
        features = torch.tanh(self.query_proj(query).unsqueeze(2) + projected_keys.unsqueeze(1))
        return self.score_proj(features).squeeze(-1)

    def forward(
        self, query: Tensor, projected_keys: Tensor, values: Tensor, valid: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """Attend from Q queries to the S keys.

        Args:
            query: (B, Q, query_size).
            projected_keys: (B, S, A) from `project_keys`.
            values: (B, S, Dv).
            valid: (B,) source lengths, or a boolean mask broadcastable to (B, Q, S).

        Returns:
            context (B, Q, Dv) and weights (B, Q, S) (before dropout).
        """
        weights = masked_softmax(self.score(query, projected_keys), valid)
        return torch.bmm(self.dropout(weights), values), weights


class DotProductAttention(nn.Module):
    """Scaled dot-product attention: softmax(Q K^T / sqrt(d)) V, with masking and dropout."""

    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    @staticmethod
    def score(queries: Tensor, keys: Tensor) -> Tensor:
        """queries (..., Q, d), keys (..., K, d) -> scores (..., Q, K)."""
        return queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])

    def forward(
        self, queries: Tensor, keys: Tensor, values: Tensor, valid: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """queries (..., Q, d), keys (..., K, d), values (..., K, dv); `valid` as in
        `masked_softmax`. Returns context (..., Q, dv) and weights (..., Q, K) (before dropout).
        """
        weights = masked_softmax(self.score(queries, keys), valid)
        return self.dropout(weights) @ values, weights


class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al., 2017):

        head_h = attention(Q W_q^h, K W_k^h, V W_v^h)
        MultiHead(Q, K, V) = concat(head_1, ..., head_H) W_o

    Calling the module does everything at once. For incremental decoding the steps are public:
    `project_q` and `project_kv` give per-head queries and keys/values (B, H, L, d), which can
    be computed once (the source keys/values of cross-attention) or grown one position per
    step (self-attention), and `attend` runs the attention and the output projection.

    seq2seq.fast.attention.BeamGroupedAttention computes the same faster in beam search.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.num_heads = num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.attention = DotProductAttention(dropout)

    def split_heads(self, x: Tensor) -> Tensor:
        """(B, L, D) -> (B, H, L, d)."""
        batch, length, dim = x.shape
        return x.view(batch, length, self.num_heads, dim // self.num_heads).transpose(1, 2)

    @staticmethod
    def merge_heads(x: Tensor) -> Tensor:
        """(B, H, L, d) -> (B, L, D): the heads concatenated."""
        batch, heads, length, head_dim = x.shape
        return x.transpose(1, 2).reshape(batch, length, heads * head_dim)

    def project_q(self, x: Tensor) -> Tensor:
        """(B, Q, D) -> per-head queries (B, H, Q, d)."""
        return self.split_heads(self.q_proj(x))

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(B, K, D) -> per-head keys and values, each (B, H, K, d)."""
        return self.split_heads(self.k_proj(x)), self.split_heads(self.v_proj(x))

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Attention of projected queries over projected keys/values, then W_o.

        Args:
            q: (B, H, Q, d); k, v: (B, H, K, d).
            mask: None, key valid lengths (B,), or a boolean mask broadcastable to (B, H, Q, K)
                (e.g. `padding_mask` (B, 1, 1, K) or `causal_mask` (Q, K)), True = attend.
            need_weights: return the per-head weights.

        Returns:
            output (B, Q, D) and weights (B, H, Q, K) or None.
        """
        if mask is not None and mask.dtype != torch.bool:
            mask = padding_mask(mask, k.shape[-2])
        context, weights = self.attention(q, k, v, mask)
        return self.out_proj(self.merge_heads(context)), weights if need_weights else None

    def forward(
        self, queries: Tensor, keys_values: Tensor, mask: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """queries (B, Q, D) attend over keys_values (B, K, D); `mask` as in `attend`.
        Self-attention passes the same tensor twice.
        """
        k, v = self.project_kv(keys_values)
        return self.attend(self.project_q(queries), k, v, mask, need_weights)
