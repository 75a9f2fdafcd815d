#!/usr/bin/env python3
"""Attention from first principles: Nadaraya-Watson kernel regression.

    examples/kernel_regression.py
    examples/kernel_regression.py --width 20 --n-train 2000 --n-test 500 --epochs 50
    examples/kernel_regression.py --out docs/kernel_regression.png   # the figure in the docs

A query x attends to keys x_i (the training inputs) and pools their values y_i (the noisy
training targets) by how close it is to each key:

    f(x) = sum_i softmax_i(-((x - x_i) w)^2 / 2) y_i

This is attention with a Gaussian kernel as the score and the same `masked_softmax` the
translation models use: `seq2seq.models.attention.nadaraya_watson`, trained by
`seq2seq.models.kernel_regression` (as the explorer's first chapter does). Four predictors are
compared on a noise-free test grid:

    constant mean     f(x) = mean(y_i): the baseline that ignores x
    fixed kernel      w = 1
    learned scalar    one w shared by all keys, trained by gradient descent (the textbook form)
    learned per-key   one w_i per key: more freedom, so it fits the noise more

Training predicts each training point from all the others (leave-one-out): a mask hides the
query's own key, or else a narrow enough kernel would just copy y_i back and reach zero loss.

Prints each predictor's test MSE and leave-one-out training MSE and draws the learned-scalar fit,
its attention weights, the kernel shapes and the training loss into one figure (--out, by
default checkpoints/kernel-regression/kernel_regression.png, which git ignores).
"""

import argparse
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from torch import Tensor

from seq2seq.commands.cli import ArgumentParser, run_cli
from seq2seq.errors import UserError
from seq2seq.models.attention import nadaraya_watson
from seq2seq.models.kernel_regression import leave_one_out_loss, sample_points, train

MAX_POINTS = 5_000  # attention matrices are n_test x n_train and n_train x n_train: ~1 GB


def draw(
    x_train: Tensor,
    y_train: Tensor,
    x_test: Tensor,
    y_test: Tensor,
    w: Tensor,
    losses: dict[str, list[float]],
) -> Figure:
    """The learned-scalar fit with its attention weights, the kernels, and the training loss."""
    figure = Figure(figsize=(11, 8.4), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    (fit_axes, map_axes), (kernel_axes, loss_axes) = figure.subplots(2, 2)
    with torch.no_grad():
        predictions, weights = nadaraya_watson(x_test, x_train, y_train, w)
    fit_axes.plot(x_test, y_test, color="black", label="truth")
    fit_axes.scatter(x_train, y_train, s=10, color="tab:gray", alpha=0.6, label="training (noisy)")
    fit_axes.plot(x_test, predictions, color="tab:red", label="prediction")
    test_mse = F.mse_loss(predictions, y_test).item()
    fit_axes.set(xlabel="x", ylabel="y", title=f"learned scalar w: test MSE {test_mse:.3f}")
    fit_axes.legend(fontsize="small")

    image = map_axes.imshow(weights, aspect="auto", cmap="viridis", interpolation="nearest")
    figure.colorbar(image, ax=map_axes, label="attention weight")
    map_axes.set(
        xlabel="training inputs x_i (sorted, index)",
        ylabel="test inputs x (index)",
        title="attention weights: each row sums to 1",
    )

    distance = torch.linspace(-3, 3, 301)
    for scale, label in ((1.0, "fixed"), (w.abs().item(), "learned scalar")):
        kernel = torch.exp(-((distance * scale) ** 2) / 2)
        kernel_axes.plot(distance, kernel, label=f"{label}, w = {scale:.2f}")
    kernel_axes.set(
        xlabel="distance x - x_i", ylabel="kernel (before normalising)", title="kernel shape"
    )
    kernel_axes.legend()

    for name, epoch_losses in losses.items():
        loss_axes.plot(range(1, len(epoch_losses) + 1), epoch_losses, label=name)
    loss_axes.set(xlabel="epoch", ylabel="leave-one-out MSE", title="training loss")
    loss_axes.legend()
    return figure


def parse_args() -> argparse.Namespace:
    parser = ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--n-train", type=int, default=50, help="training points")
    parser.add_argument("--n-test", type=int, default=50, help="test grid points")
    parser.add_argument("--width", type=float, default=5.0, help="x lies in [0, width)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data")
    parser.add_argument("--lr", type=float, default=1.0, help="step size")
    parser.add_argument("--epochs", type=int, default=200, help="full-batch gradient steps")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("checkpoints/kernel-regression/kernel_regression.png"),
        help="the figure (PNG); its folder is created",
    )
    args = parser.parse_args()
    if not 2 <= args.n_train <= MAX_POINTS:
        raise UserError(f"--n-train must be between 2 and {MAX_POINTS}, got {args.n_train}")
    if not 1 <= args.n_test <= MAX_POINTS:
        raise UserError(f"--n-test must be between 1 and {MAX_POINTS}, got {args.n_test}")
    for option, value in (("--width", args.width), ("--lr", args.lr)):
        if not (math.isfinite(value) and value > 0):
            raise UserError(f"{option} must be a positive number, got {value}")
    if args.epochs < 1:
        raise UserError(f"--epochs must be at least 1, got {args.epochs}")
    return args


def main() -> None:
    args = parse_args()

    # The data: sorted noisy training points, a noise-free test grid; all shapes (n,).
    x_train, y_train, x_test, y_test = sample_points(
        args.n_train, args.n_test, args.width, args.seed
    )

    # The kernels: w = 1 fixed, one learned w, one learned w per key (all start at 1).
    scales = {
        "fixed kernel (w = 1)": torch.ones(1),
        "learned scalar w": torch.ones(1),
        "learned per-key w": torch.ones(args.n_train),
    }
    losses = {
        name: train(scales[name], x_train, y_train, args.lr, args.epochs)
        for name in ("learned scalar w", "learned per-key w")
    }

    # The errors: on the test grid, and leave-one-out on the training points.
    others_mean = (y_train.sum() - y_train) / (args.n_train - 1)
    errors = {
        "constant mean": (
            F.mse_loss(y_train.mean().expand_as(y_test), y_test).item(),
            F.mse_loss(others_mean, y_train).item(),
        )
    }
    with torch.no_grad():
        for name, w in scales.items():
            predictions, _ = nadaraya_watson(x_test, x_train, y_train, w)
            train_mse = leave_one_out_loss(w, x_train, y_train).item()
            errors[name] = F.mse_loss(predictions, y_test).item(), train_mse
    print(f"{'model':<22} {'test MSE':>9} {'train MSE':>10}")
    for name, (test_mse, train_mse) in errors.items():
        print(f"{name:<22} {test_mse:>9.3f} {train_mse:>10.3f}")

    figure = draw(x_train, y_train, x_test, y_test, scales["learned scalar w"].detach(), losses)
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(args.out)
    except OSError as err:
        raise UserError(f"--out {args.out}: cannot write it ({err.strerror})") from None
    print(f"wrote {args.out}")


if __name__ == "__main__":
    run_cli(main)
