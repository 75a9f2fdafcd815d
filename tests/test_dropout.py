"""The CPU dropout mask: its distribution, its scale, its gradient and its seeding."""

import pytest
import torch

from seq2seq.dropout import Dropout, dropout

N = 1_000_000


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_keeps_each_element_with_probability_one_minus_p(p: float) -> None:
    torch.manual_seed(0)
    out = dropout(torch.ones(N), p, training=True)
    kept = out != 0
    rounded_p = round(p * 2**15) / 2**15
    sigma = (p * (1 - p) / N) ** 0.5
    assert abs(kept.float().mean().item() - (1 - p)) < 5 * sigma
    assert torch.all(out[kept] == 1 / (1 - rounded_p))
    # The four elements drawn from one 64-bit word are independent: equal keep rates in each
    # slot, and no correlation between neighbours.
    slots = kept.view(-1, 4).float()
    assert (slots.mean(dim=0) - (1 - p)).abs().max() < 5 * sigma * 2
    neighbours = torch.corrcoef(torch.stack([kept[:-1].float(), kept[1:].float()]))[0, 1]
    assert abs(neighbours.item()) < 0.01


def test_gradient_flows_through_kept_elements_only() -> None:
    torch.manual_seed(0)
    x = torch.randn(7, 33, requires_grad=True)
    out = dropout(x, 0.3, training=True)
    out.sum().backward()
    scale = 2**15 / (2**15 - round(0.3 * 2**15))
    torch.testing.assert_close(x.grad, (out != 0).float() * scale)


def test_identity_when_not_training_or_p_is_zero() -> None:
    x = torch.randn(5, 6)
    module = Dropout(0.3).eval()
    assert module(x) is x
    assert dropout(x, 0.0, training=True) is x
    assert torch.all(dropout(x, 1.0, training=True) == 0)


def test_same_seed_same_mask() -> None:
    x = torch.randn(4, 9, 17)
    torch.manual_seed(3)
    first = dropout(x, 0.3, training=True)
    torch.manual_seed(3)
    assert torch.equal(first, dropout(x, 0.3, training=True))
    assert not torch.equal(first, dropout(x, 0.3, training=True))
