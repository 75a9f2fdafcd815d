"""`pip install .` (not editable) gives a `seq2seq` command that finds the shipped models from
any folder: the package, its command and its models are installed, not read from the checkout."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def tracked_copy(folder: Path) -> Path:
    """The repository's tracked files copied to `folder`, as a fresh clone would have them."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True
    )
    for name in filter(None, listed.stdout.split("\0")):
        if (ROOT / name).is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, folder / name)
    return folder


@pytest.mark.slow  # builds and installs the package
@pytest.mark.skipif(shutil.which("git") is None, reason="lists the tracked files with git")
def test_the_installed_command_translates_from_another_folder(tmp_path: Path) -> None:
    source, site, elsewhere = tmp_path / "source", tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*install, "--target", str(site), str(tracked_copy(source))], check=True)
    shutil.rmtree(source)  # nothing may be read from the copy that was installed
    env = {**os.environ, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "1"}
    command = [str(site / "bin" / "seq2seq"), "translate", "--precision", "fp32"]
    result = subprocess.run(
        [*command, "--model", "transformer-tiny.multi30k.en-de"],
        input="A dog runs in the snow.\n",
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Ein Hund rennt im Schnee.\n"
    code = "import seq2seq.decoding.model_result as m; print(m.SHIPPED_MODELS)"
    where = subprocess.run(
        [sys.executable, "-c", code],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()) == site / "seq2seq" / "shipped_models"
