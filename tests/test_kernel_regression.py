"""Nadaraya-Watson kernel regression (seq2seq.models.kernel_regression) and its example
(examples/kernel_regression.py): attention pooling learns."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from seq2seq.models.attention import nadaraya_watson
from seq2seq.models.kernel_regression import leave_one_out_loss

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "kernel_regression.py"


@pytest.mark.slow  # starts a Python that imports torch
def test_the_learned_kernel_beats_the_fixed_one(tmp_path: Path) -> None:
    figure = tmp_path / "figure.png"
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--out", str(figure)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    test_mse = {
        line[:22].strip(): float(line[22:].split()[0]) for line in result.stdout.splitlines()[1:5]
    }
    assert test_mse["constant mean"] > test_mse["fixed kernel (w = 1)"]
    assert test_mse["fixed kernel (w = 1)"] > 2 * test_mse["learned scalar w"]
    assert test_mse["fixed kernel (w = 1)"] > 2 * test_mse["learned per-key w"]
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_leave_one_out_gives_the_query_its_own_key_exactly_zero_weight() -> None:
    x = torch.tensor([0.0, 0.1, 0.5, 2.0])
    y = torch.tensor([1.0, 2.0, 3.0, 4.0])
    others = ~torch.eye(4, dtype=torch.bool)
    predictions, weights = nadaraya_watson(x, x, y, torch.ones(1), others)
    assert torch.all(weights.diagonal() == 0)
    assert torch.allclose(weights.sum(dim=1), torch.ones(4))
    assert torch.isclose(predictions[0], weights[0, 1:] @ y[1:])  # from the other points only
    loss = leave_one_out_loss(torch.ones(1), x, y)
    assert torch.isclose(loss, ((predictions - y) ** 2).mean())


@pytest.mark.slow  # starts a Python that imports torch
def test_by_default_the_figure_goes_to_an_ignored_file(tmp_path: Path) -> None:
    """Run without --out, it writes under checkpoints/ (ignored by git), never a tracked file."""
    result = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    figure = Path("checkpoints/kernel-regression/kernel_regression.png")
    assert result.stdout.splitlines()[-1] == f"wrote {figure}"
    assert (tmp_path / figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(figure)], cwd=EXAMPLE.parents[1])
    assert ignored.returncode == 0, f"{figure} is not ignored by git"
