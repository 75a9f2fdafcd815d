"""Nadaraya-Watson kernel regression (seq2seq.models.kernel_regression) and its example
(examples/kernel_regression.py): attention pooling learns."""

import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from seq2seq.models.attention import nadaraya_watson
from seq2seq.models.kernel_regression import leave_one_out_loss

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "kernel_regression.py"


def run_example(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`python examples/kernel_regression.py ARGS` run in this process (a Python started for it
    imports torch, which takes longer than the example): exit status, stdout, stderr."""
    saved = sys.argv
    sys.argv = [str(EXAMPLE), *args]
    capsys.readouterr()
    try:
        runpy.run_path(str(EXAMPLE), run_name="__main__")
    except SystemExit as exit:
        return exit.code, *capsys.readouterr()
    finally:
        sys.argv = saved
    return 0, *capsys.readouterr()


# matplotlib converts the example's tensors through numpy 2's __array__ protocol and warns; in a
# process of its own, Python's default filters hid that warning (raised outside __main__)
quiet_conversion = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


@pytest.mark.slow  # trains three kernels for seconds
@quiet_conversion
def test_the_learned_kernel_beats_the_fixed_one(tmp_path: Path, capsys) -> None:
    figure = tmp_path / "figure.png"
    status, stdout, stderr = run_example(["--out", str(figure)], capsys)
    assert status == 0, stderr
    test_mse = {line[:22].strip(): float(line[22:].split()[0]) for line in stdout.splitlines()[1:5]}
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


@pytest.mark.slow  # trains three kernels for seconds
@quiet_conversion
def test_by_default_the_figure_goes_to_an_ignored_file(tmp_path: Path, capsys, monkeypatch) -> None:
    """Run without --out, it writes under checkpoints/ (ignored by git), never a tracked file."""
    monkeypatch.chdir(tmp_path)
    status, stdout, stderr = run_example([], capsys)
    assert status == 0, stderr
    figure = Path("checkpoints/kernel-regression/kernel_regression.png")
    assert stdout.splitlines()[-1] == f"wrote {figure}"
    assert (tmp_path / figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(figure)], cwd=EXAMPLE.parents[1])
    assert ignored.returncode == 0, f"{figure} is not ignored by git"
