"""The command line: process tuning (seq2seq.fast.process.tune_process: oneDNN's cache and
glibc's malloc), the decoding options, and a `--help` that imports no torch."""

import importlib
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from seq2seq.commands import COMMANDS, command_module, translate, usage
from seq2seq.commands import export as export_command
from seq2seq.commands.cli import apply_decode_options, summary
from seq2seq.config import DecodeConfig
from seq2seq.decoding import export
from seq2seq.fast.process import is_glibc

# Each round allocates three 20 MiB blocks (the size of a beam step's fp32 log-probabilities),
# fills and frees them, and prints the page faults the round took. By default glibc maps them
# afresh the first time, serves them from its heap afterwards, but hands the heap's free top
# back to the kernel when it exceeds twice the block size, so every round faults again.
PAGES = 3 * (20 << 20) // 4096  # 4 KiB pages in one round's blocks
ROUNDS = """
import ctypes, resource
{setup}
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
size = 20 << 20
for _ in range(4):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [libc.malloc(size) for _ in range(3)]
    for block in blocks:
        ctypes.memset(block, 1, size)
    for block in blocks:
        libc.free(block)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
TUNED = "from seq2seq.fast.process import tune_process; tune_process()"


def page_faults_per_round(setup: str, env: dict[str, str] | None = None) -> list[int]:
    """The page faults of each round of ROUNDS after running `setup` in a fresh process (and
    any number that `setup` prints, first)."""
    result = subprocess.run(
        [sys.executable, "-c", ROUNDS.format(setup=setup)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return [int(line) for line in result.stdout.split()]


def tuned_process(env: dict[str, str]) -> tuple[list[int], str]:
    """A fresh process, tuned: the page faults of each round of ROUNDS, and the oneDNN kernel
    cache capacity that the tuning leaves in its environment."""
    capacity = "import os; print(os.environ['ONEDNN_PRIMITIVE_CACHE_CAPACITY'])"
    first, *faults = page_faults_per_round(f"{TUNED}; {capacity}", env)
    return faults, str(first)


# Each test checks the malloc settings and the oneDNN cache in one process: a start imports
# torch (seconds). UNSET: the user's malloc settings, which tune_process leaves as they are.
UNSET = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


@pytest.mark.slow  # starts a Python that imports torch
def test_tuning_reuses_freed_memory_and_caps_the_onednn_kernel_cache() -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", *UNSET)
    }
    (first, *later), capacity = tuned_process(env)
    assert capacity == "16"
    if is_glibc():  # the settings are glibc's
        assert first > PAGES * 9 // 10  # the first round faults: the count measures what we mean
        assert max(later) < PAGES // 100


@pytest.mark.slow  # starts a Python that imports torch
def test_a_users_malloc_and_onednn_settings_are_kept() -> None:
    env = {**os.environ, "GLIBC_TUNABLES": "", "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "512"}
    faults, capacity = tuned_process(env)
    assert capacity == "512"
    if is_glibc():
        assert min(faults) > PAGES * 9 // 10


def test_every_script_starts_from_a_shell() -> None:
    root = Path(__file__).resolve().parents[1]
    scripts = [
        path
        for folder in ("benchmarks", "examples")
        for path in (root / folder).rglob("*.py")
        if "__main__" in path.read_text(encoding="utf-8")
    ]
    assert len(scripts) >= 8
    for path in scripts:
        assert path.read_text(encoding="utf-8").startswith("#!/usr/bin/env python3\n"), path
        assert os.access(path, os.X_OK), path


@pytest.mark.parametrize("command", ["translate", "evaluate", "serve"])
def test_the_decoding_commands_take_the_same_decode_options(command: str) -> None:
    module = importlib.import_module(f"seq2seq.commands.{command}")
    options = ["--max-len-ratio", "2.5", "--beam", "3", "--no-repeat-ngram", "4", "--stop-early"]
    args = module.parse_args(["--model", "transformer-tiny.multi30k.en-de", *options])
    decode_cfg = DecodeConfig()
    apply_decode_options(args, decode_cfg)
    changed = {k: v for k, v in asdict(decode_cfg).items() if getattr(DecodeConfig(), k) != v}
    assert changed == {
        "max_len_ratio": 2.5,
        "beam_size": 3,
        "no_repeat_ngram": 4,
        "stop_early": True,
    }


HELP_WITHOUT_TORCH = """
import contextlib, io, sys
from seq2seq.commands import COMMANDS, main
shown = []
for argv in [["--help"], *([name, "--help"] for name in COMMANDS)]:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            main(argv)
        except SystemExit as exit:
            assert exit.code == 0, argv
    shown.append(out.getvalue().startswith("usage: seq2seq"))
print(sorted(name for name in ("torch", "matplotlib", "uvicorn") if name in sys.modules), shown)
"""


def test_help_imports_no_torch() -> None:
    """`seq2seq --help` and every `seq2seq COMMAND --help` print their help without importing
    torch (nor matplotlib, nor uvicorn), which is what makes them answer at once."""
    result = subprocess.run(
        [sys.executable, "-c", HELP_WITHOUT_TORCH], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == f"[] {[True] * (1 + len(COMMANDS))}"


def test_usage_cuts_no_summary() -> None:
    """Each command's summary (tests/test_commands.py) ends its sentence, wrapped to 80 columns."""
    text = usage()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert all(summary(command_module(name).__doc__).endswith(".") for name in COMMANDS)
    assert "health and Prometheus metrics." in " ".join(text.split())


def test_decode_options_show_their_range(capsys) -> None:
    with pytest.raises(SystemExit):
        translate.parse_args(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--beam BEAM beam size (in [1, 256]; default: the checkpoint's decode)" in help_text
    assert "(in [0, 5]; default: the checkpoint's)" in help_text  # --length-penalty
    assert "(in (0, 10]; default: the checkpoint's)" in help_text  # --max-len-ratio


def test_exports_dtypes_are_the_exporters() -> None:
    assert tuple(sorted(export.DTYPES)) == export_command.DTYPES
