"""The label-smoothed loss: equal to F.cross_entropy, with its hand-written gradient."""

import pytest
import torch
import torch.nn.functional as F

from seq2seq.data.batching import Batch
from seq2seq.data.specials import PAD_ID
from seq2seq.training.loss import label_smoothed_cross_entropy, token_losses


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_token_losses_equal_cross_entropy_ignoring_padding(label_smoothing: float) -> None:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 11, generator=generator, requires_grad=True)
    tgt = torch.randint(4, 11, (3, 6), generator=generator)
    tgt_lens = torch.tensor([6, 4, 2])
    tgt[torch.arange(6) >= tgt_lens[:, None]] = PAD_ID
    batch = Batch(
        src=torch.zeros(3, 1, dtype=torch.long),
        src_lens=torch.ones(3, dtype=torch.long),
        tgt=tgt,
        tgt_lens=tgt_lens,
        indices=torch.arange(3),
        num_tgt_tokens=int((tgt[:, 1:] != PAD_ID).sum()),
        num_src_tokens=3,
    )
    loss, nll, alignment = token_losses(lambda *_: logits, batch, label_smoothing, None)
    assert alignment is None  # no alignment head asked for

    flat_logits, flat_target = logits.flatten(0, 1), batch.tgt_out.flatten()
    expected = F.cross_entropy(
        flat_logits,
        flat_target,
        ignore_index=PAD_ID,
        label_smoothing=label_smoothing,
        reduction="sum",
    )
    expected_nll = F.cross_entropy(flat_logits, flat_target, ignore_index=PAD_ID, reduction="sum")
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(nll, expected_nll)
    assert not nll.requires_grad
    (grad,) = torch.autograd.grad(loss, logits)
    (expected_grad,) = torch.autograd.grad(expected, logits)
    torch.testing.assert_close(grad, expected_grad)
    assert grad[batch.tgt_out == PAD_ID].abs().max() == 0.0


def test_gradient_is_p_minus_q_by_finite_differences() -> None:
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(6, 7, dtype=torch.float64, generator=generator, requires_grad=True)
    target = torch.tensor([4, 5, PAD_ID, 6, 4, PAD_ID])
    assert torch.autograd.gradcheck(
        lambda z: label_smoothed_cross_entropy(z, target, 0.2)[0], (logits,)
    )
