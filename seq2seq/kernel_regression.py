"""Attention from first principles: Nadaraya-Watson kernel regression.

A query x attends to keys x_i (the training inputs) and pools their values y_i (the noisy
training targets) by how close it is to each key:

    f(x) = sum_i softmax_i(-((x - x_i) w)^2 / 2) y_i

This is attention with a Gaussian kernel as the score and the same `masked_softmax` the
translation models use. Four predictors are compared on test inputs:

    constant mean     f(x) = mean(y_i): the baseline that ignores x
    fixed kernel      w = 1
    learned scalar    one w shared by all keys, trained by gradient descent (the textbook form)
    learned per-key   one w_i per key: more freedom, so it fits the noise more

Training predicts each training point from all the others (leave-one-out): without that, a
narrow enough kernel would just copy y_i back and reach zero loss.
"""

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from torch import Tensor, nn
from torch.utils.tensorboard import SummaryWriter

from seq2seq.attention import masked_softmax
from seq2seq.errors import UserError

NOISE_STD = 0.5  # standard deviation of the Gaussian noise on the training targets
MAX_POINTS = 5_000  # attention matrices are n_test x n_train and n_train x n_train: ~1 GB

MODEL_LABELS = {
    "constant_mean": "constant mean",
    "fixed_kernel": "fixed kernel (w = 1)",
    "learned_scalar": "learned scalar w",
    "learned_per_key": "learned per-key w",
}


def true_function(x: Tensor) -> Tensor:
    """The noise-free target: 2 sin(x) + 0.4 sin(3x) + 0.6 sin(6x) + sqrt(x), for x >= 0."""
    return 2 * torch.sin(x) + 0.4 * torch.sin(3 * x) + 0.6 * torch.sin(6 * x) + x.sqrt()


@dataclass
class RegressionData:
    """Training points (noisy) and test points (on a grid, noise-free); all shapes (n,)."""

    x_train: Tensor  # sorted, uniform on [0, width)
    y_train: Tensor
    x_test: Tensor  # evenly spaced over [0, width)
    y_test: Tensor


def make_data(n_train: int, n_test: int, width: float, seed: int) -> RegressionData:
    generator = torch.Generator().manual_seed(seed)
    x_train = torch.sort(torch.rand(n_train, generator=generator) * width).values
    noise = NOISE_STD * torch.randn(n_train, generator=generator)
    x_test = torch.arange(n_test) * (width / n_test)
    return RegressionData(x_train, true_function(x_train) + noise, x_test, true_function(x_test))


def leave_one_out_mask(n: int) -> Tensor:
    """(n, n) boolean mask, False on the diagonal: query i may attend every key but its own."""
    return ~torch.eye(n, dtype=torch.bool)


def attention_pool(
    queries: Tensor, keys: Tensor, values: Tensor, w: Tensor, valid: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Gaussian-kernel attention pooling.

    Args:
        queries: (Q,) query inputs.
        keys: (K,) key inputs.
        values: (K,) values, one per key.
        w: () or (1,) one kernel scale for every key, or (K,) one per key; larger w, narrower
            kernel.
        valid: optional (Q, K) boolean mask, True where a query may attend a key.

    Returns:
        outputs: (Q,) pooled values.
        weights: (Q, K) attention weights; each row sums to 1 over its valid keys.
    """
    scores = -(((queries[:, None] - keys[None, :]) * w) ** 2) / 2  # (Q, K)
    weights = masked_softmax(scores, valid)
    return weights @ values, weights


class KernelPooling(nn.Module):
    """Attention pooling whose kernel scale w is learned: one shared w, or one w per key.

    w starts at 1, so before training this is the fixed kernel.
    """

    def __init__(self, num_scales: int = 1) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(num_scales))

    def forward(
        self, queries: Tensor, keys: Tensor, values: Tensor, valid: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """(Q,) queries, (K,) keys and values -> (Q,) outputs, (Q, K) weights."""
        return attention_pool(queries, keys, values, self.w, valid)


def leave_one_out_loss(model: KernelPooling, data: RegressionData) -> Tensor:
    """() mean squared error of predicting each training point from all the others."""
    mask = leave_one_out_mask(len(data.x_train))
    predictions, _ = model(data.x_train, data.x_train, data.y_train, mask)
    return F.mse_loss(predictions, data.y_train)


def train_pooling(
    model: KernelPooling, data: RegressionData, lr: float, epochs: int
) -> list[float]:
    """Full-batch gradient descent (SGD without momentum) on the leave-one-out loss.

    Each epoch is one step w <- w - step * dloss/dw over the whole training set. A per-key w_i
    only moves the predictions of queries near its key, so its gradient is about 1/n of a shared
    w's: the step is `lr` times the number of scales, so one `lr` suits both variants.

    Returns the loss of each epoch, computed before that epoch's step.
    """
    step = lr * model.w.numel()
    losses = []
    for _ in range(epochs):
        loss = leave_one_out_loss(model, data)
        (gradient,) = torch.autograd.grad(loss, model.w)
        with torch.no_grad():
            model.w -= step * gradient
        losses.append(loss.item())
    return losses


@dataclass
class Settings:
    """Everything one run needs; the defaults are the classic 50-point example."""

    n_train: int = 50
    n_test: int = 50
    width: float = 5.0  # inputs lie in [0, width)
    seed: int = 0
    lr: float = 1.0
    epochs: int = 200
    run_dir: Path = Path("checkpoints/kernel-regression")

    def validate(self) -> None:
        if not 2 <= self.n_train <= MAX_POINTS:
            raise UserError(f"--n-train must be between 2 and {MAX_POINTS}, got {self.n_train}")
        if not 1 <= self.n_test <= MAX_POINTS:
            raise UserError(f"--n-test must be between 1 and {MAX_POINTS}, got {self.n_test}")
        if not (math.isfinite(self.width) and self.width > 0):
            raise UserError(f"--width must be a positive number, got {self.width}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise UserError(f"--lr must be a positive number, got {self.lr}")
        if self.epochs < 1:
            raise UserError(f"--epochs must be at least 1, got {self.epochs}")


@dataclass
class Fit:
    """One predictor's results: its test predictions and both errors."""

    predictions: Tensor  # (n_test,)
    weights: Tensor | None  # (n_test, n_train) attention weights; None for the constant mean
    test_mse: float  # against the noise-free truth
    train_mse: float  # leave-one-out, against the noisy training targets


def evaluate(model: KernelPooling, data: RegressionData) -> Fit:
    """Predict the test inputs from all training points; also the leave-one-out training MSE."""
    with torch.no_grad():
        predictions, weights = model(data.x_test, data.x_train, data.y_train)
        train_mse = leave_one_out_loss(model, data).item()
    test_mse = F.mse_loss(predictions, data.y_test).item()
    return Fit(predictions, weights, test_mse, train_mse)


def constant_mean_fit(data: RegressionData) -> Fit:
    """Predict the mean training target everywhere (leave-one-out: the mean of the others)."""
    n = len(data.y_train)
    predictions = data.y_train.mean().expand_as(data.y_test)
    others_mean = (data.y_train.sum() - data.y_train) / (n - 1)
    return Fit(
        predictions,
        None,
        F.mse_loss(predictions, data.y_test).item(),
        F.mse_loss(others_mean, data.y_train).item(),
    )


def run(settings: Settings) -> dict[str, Fit]:
    """Fit the four predictors, write TensorBoard events and PNGs to the run folder.

    Returns each predictor's `Fit`, by name (the keys of MODEL_LABELS).
    """
    settings.validate()
    data = make_data(settings.n_train, settings.n_test, settings.width, settings.seed)
    models = {
        "fixed_kernel": KernelPooling(),
        "learned_scalar": KernelPooling(),
        "learned_per_key": KernelPooling(settings.n_train),
    }
    losses = {
        name: train_pooling(models[name], data, settings.lr, settings.epochs)
        for name in ("learned_scalar", "learned_per_key")
    }
    fits = {"constant_mean": constant_mean_fit(data)}
    fits.update({name: evaluate(model, data) for name, model in models.items()})

    figures = {
        f"attention_{name}": fit_figure(data, MODEL_LABELS[name], fits[name]) for name in models
    }
    figures["kernel_shape"] = kernel_figure(
        data, models["learned_scalar"], models["learned_per_key"]
    )
    figures["training_loss"] = loss_figure(losses)
    write_run(settings.run_dir, losses, fits, figures)
    return fits


def write_run(
    run_dir: Path,
    losses: dict[str, list[float]],
    fits: dict[str, Fit],
    figures: dict[str, Figure],
) -> None:
    """Write `<name>.png` per figure and one TensorBoard event file, replacing earlier runs'."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"--run-dir {run_dir}: cannot create it ({err.strerror})") from err
    for old_events in run_dir.glob("events.out.tfevents.*"):
        old_events.unlink()
    writer = SummaryWriter(str(run_dir))
    for name, epoch_losses in losses.items():
        for epoch, loss in enumerate(epoch_losses, start=1):
            writer.add_scalar(f"train_loss/{name}", loss, epoch)
    for name, fit in fits.items():
        writer.add_scalar(f"test_mse/{name}", fit.test_mse, 0)
    for name, figure in figures.items():
        figure.savefig(run_dir / f"{name}.png")
        writer.add_figure(f"figures/{name}", figure, 0)
    writer.close()


def format_table(fits: dict[str, Fit]) -> str:
    """Each predictor's test MSE and leave-one-out training MSE as a text table."""
    rows = [f"{'model':<22} {'test MSE':>9} {'train MSE':>10}"]
    rows += [
        f"{MODEL_LABELS[name]:<22} {fit.test_mse:>9.3f} {fit.train_mse:>10.3f}"
        for name, fit in fits.items()
    ]
    return "\n".join(rows)


def new_figure(width_inches: float, height_inches: float) -> Figure:
    """A matplotlib figure drawn by the Agg backend (no display needed)."""
    figure = Figure(figsize=(width_inches, height_inches), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def fit_figure(data: RegressionData, label: str, fit: Fit) -> Figure:
    """Left: the fitted curve against the truth and the noisy points. Right: the attention map."""
    figure = new_figure(11, 4.2)
    fit_axes, map_axes = figure.subplots(1, 2)
    fit_axes.plot(data.x_test, data.y_test, color="black", label="truth")
    fit_axes.scatter(
        data.x_train, data.y_train, s=10, color="tab:gray", alpha=0.6, label="training (noisy)"
    )
    fit_axes.plot(data.x_test, fit.predictions, color="tab:red", label="prediction")
    fit_axes.set(xlabel="x", ylabel="y", title=f"{label}: test MSE {fit.test_mse:.3f}")
    fit_axes.legend(fontsize="small")

    image = map_axes.imshow(fit.weights, aspect="auto", cmap="viridis", interpolation="nearest")
    figure.colorbar(image, ax=map_axes, label="attention weight")
    map_axes.set(
        xlabel="training inputs x_i (sorted, index)",
        ylabel="test inputs x (index)",
        title="attention weights: each row sums to 1",
    )
    return figure


def kernel_figure(data: RegressionData, scalar: KernelPooling, per_key: KernelPooling) -> Figure:
    """Left: the kernel exp(-(d w)^2 / 2) against distance d. Right: the learned w of each key."""
    figure = new_figure(11, 4.2)
    shape_axes, scale_axes = figure.subplots(1, 2)
    distance = torch.linspace(-3, 3, 301)
    learned_w = scalar.w.detach().abs().item()
    for w, label in ((1.0, "fixed, w = 1"), (learned_w, f"learned scalar, w = {learned_w:.2f}")):
        shape_axes.plot(distance, torch.exp(-((distance * w) ** 2) / 2), label=label)
    shape_axes.set(
        xlabel="distance x - x_i",
        ylabel="kernel (before normalising)",
        title="kernel shape",
    )
    shape_axes.legend()

    scale_axes.scatter(data.x_train, per_key.w.detach().abs(), s=12, label="per-key |w_i|")
    scale_axes.axhline(learned_w, color="tab:orange", linestyle="--", label="learned scalar w")
    scale_axes.axhline(1.0, color="tab:blue", linestyle=":", label="fixed w = 1")
    scale_axes.set(
        xlabel="training input x_i",
        ylabel="kernel scale |w| (larger = narrower)",
        title="learned scale of each key",
    )
    scale_axes.legend()
    return figure


def loss_figure(losses: dict[str, list[float]]) -> Figure:
    """Leave-one-out training loss per epoch of each learned model."""
    figure = new_figure(6, 4.2)
    axes = figure.subplots()
    for name, epoch_losses in losses.items():
        axes.plot(range(1, len(epoch_losses) + 1), epoch_losses, label=MODEL_LABELS[name])
    axes.set(xlabel="epoch", ylabel="leave-one-out MSE", title="training loss")
    axes.legend()
    return figure
