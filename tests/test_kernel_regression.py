"""Nadaraya-Watson kernel regression: attention pooling, its training and the demo script."""

import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from matplotlib.image import imread
from tensorboard.backend.event_processing.event_accumulator import (
    IMAGES,
    SCALARS,
    EventAccumulator,
)

from seq2seq.errors import UserError
from seq2seq.kernel_regression import (
    MODEL_LABELS,
    KernelPooling,
    RegressionData,
    Settings,
    attention_pool,
    constant_mean_fit,
    evaluate,
    leave_one_out_loss,
    leave_one_out_mask,
    make_data,
    train_pooling,
    write_run,
)

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "kernel_regression.py"
MODELS = ("constant_mean", "fixed_kernel", "learned_scalar", "learned_per_key")
FIGURES = (
    "attention_fixed_kernel",
    "attention_learned_scalar",
    "attention_learned_per_key",
    "kernel_shape",
    "training_loss",
)


def truth(x: torch.Tensor) -> torch.Tensor:
    return 2 * torch.sin(x) + 0.4 * torch.sin(3 * x) + 0.6 * torch.sin(6 * x) + x**0.5


@pytest.fixture
def data() -> RegressionData:
    return make_data(n_train=50, n_test=40, width=5.0, seed=0)


def test_data_is_sorted_noisy_training_points_and_a_noise_free_test_grid(data) -> None:
    assert torch.all(data.x_train[1:] >= data.x_train[:-1])
    assert data.x_train.min() >= 0 and data.x_train.max() < 5
    assert torch.allclose(data.x_test, torch.arange(40) * 0.125)
    assert torch.allclose(data.y_test, truth(data.x_test))
    noise = data.y_train - truth(data.x_train)
    assert 0.3 < noise.std() < 0.7  # N(0, 0.5) on 50 points


def test_fixed_kernel_rows_sum_to_one_and_peak_at_the_nearest_training_input(data) -> None:
    outputs, weights = attention_pool(data.x_test, data.x_train, data.y_train, torch.tensor(1.0))
    assert weights.shape == (40, 50)
    assert torch.allclose(weights.sum(dim=1), torch.ones(40))
    nearest = (data.x_test[:, None] - data.x_train[None, :]).abs().argmin(dim=1)
    assert torch.equal(weights.argmax(dim=1), nearest)
    gaussian = torch.exp(-((data.x_test[:, None] - data.x_train[None, :]) ** 2) / 2)
    assert torch.allclose(weights, gaussian / gaussian.sum(dim=1, keepdim=True), atol=1e-6)
    assert torch.allclose(outputs, weights @ data.y_train)


def test_fixed_kernel_beats_the_constant_mean_predictor(data) -> None:
    mean_fit = constant_mean_fit(data)
    assert torch.all(mean_fit.predictions == data.y_train.mean())
    assert evaluate(KernelPooling(), data).test_mse < 0.5 * mean_fit.test_mse


def test_leave_one_out_mask_gives_exactly_zero_weight_to_the_query_itself(data) -> None:
    mask = leave_one_out_mask(50)
    _, weights = attention_pool(data.x_train, data.x_train, data.y_train, torch.tensor(1.0), mask)
    assert torch.all(weights.diagonal() == 0)
    assert torch.allclose(weights.sum(dim=1), torch.ones(50))
    _, unmasked = attention_pool(data.x_train, data.x_train, data.y_train, torch.tensor(1.0))
    renormalised = unmasked * mask / (unmasked * mask).sum(dim=1, keepdim=True)
    assert torch.allclose(weights, renormalised, atol=1e-6)


def test_constant_mean_training_error_leaves_each_point_out(data) -> None:
    others_mean = torch.stack(
        [torch.cat([data.y_train[:i], data.y_train[i + 1 :]]).mean() for i in range(50)]
    )
    expected = ((others_mean - data.y_train) ** 2).mean().item()
    assert constant_mean_fit(data).train_mse == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("num_scales", [1, 50], ids=["scalar", "per_key"])
def test_training_lowers_the_leave_one_out_loss(data, num_scales: int) -> None:
    model = KernelPooling(num_scales)
    loss_before = leave_one_out_loss(model, data).item()
    losses = train_pooling(model, data, lr=1.0, epochs=30)
    assert len(losses) == 30
    assert losses[0] == pytest.approx(loss_before, rel=1e-5)  # w = 1 before the first step
    assert leave_one_out_loss(model, data).item() < 0.7 * loss_before
    assert model.w.shape == (num_scales,)
    assert torch.all(model.w.detach() > 1)  # the fixed kernel was too wide for this data


@pytest.mark.parametrize(
    "field, value, option",
    [
        ("n_train", 1, "--n-train"),
        ("n_test", 0, "--n-test"),
        ("width", -5.0, "--width"),
        ("width", float("nan"), "--width"),
        ("lr", 0.0, "--lr"),
        ("epochs", 0, "--epochs"),
    ],
)
def test_bad_settings_are_user_errors_naming_the_option(field, value, option) -> None:
    with pytest.raises(UserError, match=f"^{option} "):
        Settings(**{field: value}).validate()


def test_a_rerun_replaces_the_previous_event_file(tmp_path: Path) -> None:
    for _ in range(2):
        write_run(tmp_path, {"learned_scalar": [1.0, 0.5]}, {}, {})
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 1


def test_script_writes_the_table_pngs_and_tensorboard_events(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--run-dir", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    # CPU seconds, not wall-clock ones: other jobs on a shared machine stretch the wall clock,
    # and on an idle one the wall clock is no longer than the CPU time.
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds = sum(
        getattr(cpu_after, f) - getattr(cpu_before, f) for f in ("ru_utime", "ru_stime")
    )
    assert cpu_seconds < 30
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["model", "test", "MSE", "train", "MSE"]
    assert [line[:22].strip() for line in lines[1:5]] == [MODEL_LABELS[name] for name in MODELS]
    mse = dict(zip(MODELS, (float(line[22:].split()[0]) for line in lines[1:5]), strict=True))
    assert mse["constant_mean"] > mse["fixed_kernel"] > mse["learned_scalar"]

    for name in FIGURES:
        png = run_dir / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        height, width, channels = imread(png).shape
        assert width > 500 and height > 300 and channels == 4

    events = EventAccumulator(str(run_dir), size_guidance={IMAGES: 0, SCALARS: 0})
    events.Reload()
    tags = events.Tags()
    assert set(tags["images"]) == {f"figures/{name}" for name in FIGURES}
    assert set(tags["scalars"]) == {f"test_mse/{name}" for name in MODELS} | {
        "train_loss/learned_scalar",
        "train_loss/learned_per_key",
    }
    assert len(events.Scalars("train_loss/learned_scalar")) == Settings().epochs
    logged_mse = events.Scalars("test_mse/fixed_kernel")[0].value
    assert logged_mse == pytest.approx(mse["fixed_kernel"], abs=5e-4)


def test_script_bad_option_is_a_one_line_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--n-train", "-3", "--run-dir", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --n-train must be between 2 and 5000, got -3"
    ]
    assert not (tmp_path / "run").exists()
