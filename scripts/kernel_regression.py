"""Attention pooling from first principles: Nadaraya-Watson kernel regression.

    .venv/bin/python scripts/kernel_regression.py
    .venv/bin/python scripts/kernel_regression.py --width 20 --n-train 2000 --n-test 500 --epochs 50

Prints each predictor's test MSE and leave-one-out training MSE, and writes figures (PNG and
TensorBoard) to --run-dir.
"""

import argparse
from pathlib import Path

from seq2seq.cli import run_cli
from seq2seq.kernel_regression import Settings, format_table, run


def main() -> None:
    defaults = Settings()
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--n-train", type=int, default=defaults.n_train, help="training points")
    parser.add_argument("--n-test", type=int, default=defaults.n_test, help="test grid points")
    parser.add_argument("--width", type=float, default=defaults.width, help="x lies in [0, width)")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="seed of the data")
    parser.add_argument(
        "--lr", type=float, default=defaults.lr, help="step size (per-key w: times --n-train)"
    )
    parser.add_argument(
        "--epochs", type=int, default=defaults.epochs, help="full-batch gradient steps"
    )
    parser.add_argument("--run-dir", type=Path, default=defaults.run_dir, help="output folder")
    args = parser.parse_args()
    settings = Settings(**vars(args))
    fits = run(settings)
    print(format_table(fits))
    print(f"figures and TensorBoard events in {settings.run_dir}")


if __name__ == "__main__":
    run_cli(main)
