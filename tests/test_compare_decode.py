"""Two trees side by side (benchmarks/compare_decode.py): a tree against itself decodes the same
sentences to the same outputs in both processes; a folder that is not a tree is one error line.
Timings are never asserted."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = [sys.executable, str(ROOT / "benchmarks" / "compare_decode.py")]


@pytest.mark.slow  # two Pythons that import torch and decode with the shipped model
@pytest.mark.parametrize(
    "model", ["transformer-tiny.multi30k.en-de", "transformer-small.tatoeba.en-fr"]
)
def test_a_tree_against_itself_gives_the_same_outputs(model: str, tmp_path: Path) -> None:
    """Also a model that decodes with the number guard by default, which needs its languages."""
    sources = tmp_path / "test.en"
    sources.write_text("A dog runs in the snow.\nTwo men play 11 games.\nA girl reads.\n")
    options = ["--model", model, "--sources", str(sources), "--one-by-one", "2", "--batches", "2"]
    options += ["--batch-size", "3", "--repeats", "1", "--precision", "fp32", "fp32"]
    result = subprocess.run(
        [*SCRIPT, str(ROOT), str(ROOT), *options], capture_output=True, text=True, check=True
    )
    # 2 lines alone and 2 batches of 3, in each tree: 2 + 6 outputs each, all the same
    assert "same outputs: 8 of 8" in result.stdout
    assert result.stdout.count(" fp32: one at a time ") == 2
    assert re.search(r"one at a time: second/first time \d+\.\d{3}\n", result.stdout)
    assert re.search(r"batch 3: second/first time \d+\.\d{3}\n", result.stdout)


@pytest.mark.slow  # starts Pythons that import torch
def test_a_folder_that_is_no_tree_or_three_precisions_are_one_error_line(tmp_path: Path) -> None:
    result = subprocess.run([*SCRIPT, str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 2
    no_tree = f"{tmp_path}: not a source tree of seq2seq (no seq2seq/__init__.py)"
    assert result.stderr == f"error: {no_tree}\n"
    three = ["--precision", "fp32", "int8", "bf16"]
    result = subprocess.run([*SCRIPT, str(ROOT), str(ROOT), *three], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.startswith("error: --precision: one value for both trees, or two")
