"""Nadaraya-Watson kernel regression, trained: the first attention, on data of one variable.

A query x attends to keys x_i (the training inputs) and pools their values y_i (the noisy
training targets) by `seq2seq.models.attention.nadaraya_watson`:

    f(x) = sum_i softmax_i(-((x - x_i) w)^2 / 2) y_i

The kernel scale w is learned by gradient descent on the leave-one-out loss: each training
point is predicted from all the others, or else a narrow enough kernel would just copy y_i
back and reach zero loss. examples/kernel_regression.py and the explorer's Nadaraya-Watson
chapter both train it here.
"""

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from seq2seq.models.attention import nadaraya_watson

NOISE_STD = 0.5  # standard deviation of the Gaussian noise on the training targets


class Points(NamedTuple):
    """Sorted noisy training points and a noise-free test grid; every field of shape (n,)."""

    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor


def true_function(x: Tensor) -> Tensor:
    """The noise-free target: 2 sin(x) + 0.4 sin(3x) + 0.6 sin(6x) + sqrt(x), for x >= 0."""
    return 2 * torch.sin(x) + 0.4 * torch.sin(3 * x) + 0.6 * torch.sin(6 * x) + x.sqrt()


def sample_points(n_train: int, n_test: int, width: float, seed: int) -> Points:
    """`n_train` inputs drawn uniformly from [0, width) with noisy targets, sorted, and
    `n_test` evenly spaced test inputs over [0, width) with their true targets."""
    generator = torch.Generator().manual_seed(seed)
    x_train = torch.sort(torch.rand(n_train, generator=generator) * width).values
    y_train = true_function(x_train) + NOISE_STD * torch.randn(n_train, generator=generator)
    x_test = torch.arange(n_test) * (width / n_test)
    return Points(x_train, y_train, x_test, true_function(x_test))


def leave_one_out_loss(w: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """() mean squared error of predicting each training point from all the others."""
    others = ~torch.eye(len(x), dtype=torch.bool)  # (n, n): every key but the query's own
    predictions, _ = nadaraya_watson(x, x, y, w, others)
    return F.mse_loss(predictions, y)


def train(w: Tensor, x: Tensor, y: Tensor, lr: float, epochs: int) -> list[float]:
    """Full-batch gradient descent of the kernel scales `w` ((1,) or (n,), changed in place) on
    the leave-one-out loss of the points x, y (n,); returns each epoch's loss.

    A per-key w_i only moves the predictions of queries near its key, so its gradient is about
    1/n of a shared w's: the step is `lr` times the number of scales, so one `lr` suits both."""
    w.requires_grad_(True)
    losses = []
    for _ in range(epochs):
        loss = leave_one_out_loss(w, x, y)
        (gradient,) = torch.autograd.grad(loss, w)
        with torch.no_grad():
            w -= lr * w.numel() * gradient
        losses.append(loss.item())
    w.requires_grad_(False)
    return losses
