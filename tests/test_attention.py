"""Attention building blocks against their formulas and against PyTorch's reference modules."""

import math

import pytest
import torch
from torch import nn

from seq2seq.models.attention import (
    AdditiveAttention,
    DotProductAttention,
    MultiHeadAttention,
    causal_mask,
    masked_softmax,
    padding_mask,
)
from seq2seq.models.positional import PositionalEncoding


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def assert_rows_are_distributions(weights: torch.Tensor, mask: torch.Tensor) -> None:
    """Masked entries exactly 0; rows with a valid key sum to 1; rows without are all 0."""
    mask = mask.expand_as(weights)
    assert not torch.isnan(weights).any()
    assert torch.all(weights[~mask] == 0)
    sums = weights.sum(-1)
    has_key = mask.any(-1)
    torch.testing.assert_close(sums[has_key], torch.ones_like(sums[has_key]))
    assert torch.all(sums[~has_key] == 0)


# masked_softmax ----------------------------------------------------------------------------


def test_masked_softmax_lengths_per_batch_row() -> None:
    scores = torch.randn(3, 2, 5)
    lens = torch.tensor([5, 2, 0])
    weights = masked_softmax(scores, lens)
    mask = torch.arange(5) < lens[:, None, None]
    assert_rows_are_distributions(weights, mask)
    torch.testing.assert_close(weights[1, :, :2], torch.softmax(scores[1, :, :2], -1))
    torch.testing.assert_close(weights[0], torch.softmax(scores[0], -1))
    assert torch.all(weights[2] == 0)


def test_masked_softmax_lengths_per_query_row_with_heads() -> None:
    scores = torch.randn(2, 3, 4, 6)  # (batch, heads, queries, keys)
    lens = torch.tensor([[1, 2, 6, 0], [3, 3, 3, 3]])
    weights = masked_softmax(scores, lens)
    mask = torch.arange(6) < lens[:, None, :, None]
    assert_rows_are_distributions(weights, mask)
    torch.testing.assert_close(weights[0, :, 1, :2], torch.softmax(scores[0, :, 1, :2], -1))


def test_masked_softmax_lengths_per_query_row_without_heads() -> None:
    scores = torch.randn(2, 4, 6)
    lens = torch.tensor([[1, 2, 6, 0], [3, 3, 3, 3]])
    weights = masked_softmax(scores, lens)
    assert_rows_are_distributions(weights, torch.arange(6) < lens[:, :, None])


def test_masked_softmax_bool_mask_matches_lengths_and_handles_empty_rows() -> None:
    scores = torch.randn(2, 4, 4)
    mask = causal_mask(4) & torch.tensor([[True] * 4, [False] * 4])[:, None, :]
    weights = masked_softmax(scores, mask)
    assert_rows_are_distributions(weights, mask)
    assert torch.all(weights[1] == 0)
    # A causal mask is the per-query length i + 1.
    lens = torch.arange(1, 5).expand(2, 4)
    causal = masked_softmax(scores, causal_mask(4))
    torch.testing.assert_close(causal, masked_softmax(scores, lens), rtol=0, atol=0)


def test_masked_softmax_none_is_softmax_and_gradient_is_finite() -> None:
    scores = torch.randn(2, 3, 5, requires_grad=True)
    torch.testing.assert_close(masked_softmax(scores, None), torch.softmax(scores, -1))
    weights = masked_softmax(scores, torch.tensor([0, 3]))
    (weights * torch.randn_like(weights)).sum().backward()
    assert torch.isfinite(scores.grad).all()
    assert torch.all(scores.grad[0] == 0)  # nothing attended, nothing learned
    assert torch.all(scores.grad[1, :, 3:] == 0)


def test_padding_and_causal_masks() -> None:
    mask = padding_mask(torch.tensor([2, 0, 3]), 3)
    assert mask.shape == (3, 1, 1, 3)
    expected = torch.tensor([[1, 1, 0], [0, 0, 0], [1, 1, 1]], dtype=torch.bool)
    assert torch.equal(mask[:, 0, 0], expected)
    assert torch.equal(causal_mask(3), torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]]).bool())


# Additive and dot-product attention --------------------------------------------------------


def test_additive_attention_matches_textbook_loop() -> None:
    batch, queries, keys, dq, dk, dv, size = 2, 3, 5, 4, 6, 7, 8
    attention = AdditiveAttention(dq, dk, size)
    query = torch.randn(batch, queries, dq)
    key = torch.randn(batch, keys, dk)
    value = torch.randn(batch, keys, dv)
    lens = torch.tensor([5, 2])
    context, weights = attention(query, attention.project_keys(key), value, lens)

    w_q = attention.query_proj.weight
    w_k = attention.key_proj.weight
    w_v = attention.score_proj.weight[0]
    for b in range(batch):
        for i in range(queries):
            n = int(lens[b])
            scores = torch.stack(
                [w_v @ torch.tanh(w_q @ query[b, i] + w_k @ key[b, j]) for j in range(n)]
            )
            expected = torch.softmax(scores, 0)
            torch.testing.assert_close(weights[b, i, :n], expected)
            assert torch.all(weights[b, i, n:] == 0)
            torch.testing.assert_close(context[b, i], expected @ value[b, :n])


def test_dot_product_attention_matches_formula() -> None:
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
    lens = torch.tensor([5, 1])
    context, weights = DotProductAttention()(q, k, v, lens)
    scores = q @ k.transpose(1, 2) / math.sqrt(4)
    expected = torch.softmax(scores[1, :, :1], -1)
    torch.testing.assert_close(weights[0], torch.softmax(scores[0], -1))
    torch.testing.assert_close(weights[1, :, :1], expected)
    assert torch.all(weights[1, :, 1:] == 0)
    torch.testing.assert_close(context[1], expected @ v[1, :1])


def test_attention_weight_dropout_only_in_training() -> None:
    attention = DotProductAttention(dropout=0.5)
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
    attention.train()
    dropped, _ = attention(q, k, v, None)
    attention.eval()
    kept, weights = attention(q, k, v, None)
    assert not torch.allclose(dropped, kept)
    torch.testing.assert_close(kept, weights @ v)


# Multi-head attention ----------------------------------------------------------------------

EMBED, HEADS = 16, 4


def paired_modules() -> tuple[MultiHeadAttention, nn.MultiheadAttention]:
    """Our module and PyTorch's, with the same weights."""
    ours = MultiHeadAttention(EMBED, HEADS).eval()
    reference = nn.MultiheadAttention(EMBED, HEADS, batch_first=True).eval()
    nn.init.normal_(reference.in_proj_bias)
    nn.init.normal_(reference.out_proj.bias)
    with torch.no_grad():
        w_q, w_k, w_v = reference.in_proj_weight.chunk(3)
        b_q, b_k, b_v = reference.in_proj_bias.chunk(3)
        for proj, weight, bias in [
            (ours.q_proj, w_q, b_q),
            (ours.k_proj, w_k, b_k),
            (ours.v_proj, w_v, b_v),
            (ours.out_proj, reference.out_proj.weight, reference.out_proj.bias),
        ]:
            proj.weight.copy_(weight)
            proj.bias.copy_(bias)
    return ours, reference


@pytest.mark.parametrize("masking", ["none", "padding", "causal", "padding+causal"])
def test_multi_head_attention_matches_pytorch(masking: str) -> None:
    ours, reference = paired_modules()
    batch, length = 3, 6
    x = torch.randn(batch, length, EMBED)
    lens = torch.tensor([6, 4, 1])
    use_padding = "padding" in masking
    use_causal = "causal" in masking
    mask = None
    if use_padding:
        mask = padding_mask(lens, length)
    if use_causal:
        mask = causal_mask(length) if mask is None else mask & causal_mask(length)
    expected, expected_weights = reference(
        x,
        x,
        x,
        key_padding_mask=~padding_mask(lens, length)[:, 0, 0] if use_padding else None,
        attn_mask=~causal_mask(length) if use_causal else None,
        average_attn_weights=False,
    )
    explicit, weights = ours(x, x, mask, need_weights=True)
    _, no_weights = ours(x, x, mask)
    assert no_weights is None
    assert weights.shape == (batch, HEADS, length, length)
    torch.testing.assert_close(explicit, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(weights, expected_weights, rtol=1e-5, atol=1e-6)


def test_multi_head_attention_accepts_key_lengths() -> None:
    ours, _ = paired_modules()
    queries, memory = torch.randn(2, 3, EMBED), torch.randn(2, 5, EMBED)
    lens = torch.tensor([5, 2])
    by_lens, weights = ours(queries, memory, lens, need_weights=True)
    by_mask, _ = ours(queries, memory, padding_mask(lens, 5), need_weights=True)
    torch.testing.assert_close(by_lens, by_mask, rtol=0, atol=0)
    assert torch.all(weights[1, :, :, 2:] == 0)


def test_fully_masked_rows_are_finite() -> None:
    ours, _ = paired_modules()
    ours.train()  # no dropout configured
    queries = torch.randn(2, 3, EMBED, requires_grad=True)
    memory = torch.randn(2, 4, EMBED)
    lens = torch.tensor([0, 2])  # row 0 may attend to nothing
    out, _ = ours(queries, memory, lens)
    # No key: the context is zero, so the output is the output projection's bias.
    torch.testing.assert_close(out[0], ours.out_proj.bias.expand(3, EMBED).detach())
    out.sum().backward()
    assert torch.isfinite(queries.grad).all()


def test_incremental_self_attention_matches_causal_attention() -> None:
    """Cached keys/values grown one position per step give the causal attention's outputs."""
    ours, _ = paired_modules()
    x = torch.randn(2, 5, EMBED)
    full, _ = ours(x, x, causal_mask(5))
    k_cache = v_cache = x.new_zeros(2, HEADS, 0, EMBED // HEADS)
    for t in range(5):
        k_t, v_t = ours.project_kv(x[:, t : t + 1])
        k_cache, v_cache = torch.cat([k_cache, k_t], 2), torch.cat([v_cache, v_t], 2)
        step, _ = ours.attend(ours.project_q(x[:, t : t + 1]), k_cache, v_cache, None)
        torch.testing.assert_close(step[:, 0], full[:, t], rtol=1e-5, atol=1e-6)


def test_cross_attention_keys_projected_once_are_reused() -> None:
    ours, _ = paired_modules()
    queries, memory = torch.randn(2, 4, EMBED), torch.randn(2, 6, EMBED)
    lens = torch.tensor([6, 3])
    full, _ = ours(queries, memory, lens)
    k, v = ours.project_kv(memory)
    for t in range(4):
        step, _ = ours.attend(ours.project_q(queries[:, t : t + 1]), k, v, lens)
        torch.testing.assert_close(step[:, 0], full[:, t], rtol=1e-5, atol=1e-6)


# Positional encoding -----------------------------------------------------------------------


def test_positional_encoding_matches_formula() -> None:
    dim = 10
    encodings = PositionalEncoding(dim)(torch.arange(50))
    assert encodings.shape == (50, dim)
    for pos in [0, 1, 7, 49]:
        for i in range(dim // 2):
            angle = pos / 10000 ** (2 * i / dim)
            assert encodings[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert encodings[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


def test_positional_encoding_any_length_and_positions() -> None:
    pe = PositionalEncoding(8)
    short = pe(torch.arange(4))
    long = pe(torch.arange(20_000))  # past any length seen before: no table to fall off
    torch.testing.assert_close(long[:4], short)
    angle = 19_999 / 10000 ** (2 / 8)
    assert long[19_999, 2].item() == pytest.approx(math.sin(angle), abs=1e-3)
    # Per-row positions (incremental decoding) pick the same rows.
    steps = torch.tensor([[3], [0], [19_999]])
    torch.testing.assert_close(pe(steps)[:, 0], long[steps[:, 0]])
    assert PositionalEncoding(7)(torch.arange(3)).shape == (3, 7)  # odd sizes work too
