"""What decode_report.py and measure_report.py share: the machine, the peers' versions, the
output file."""

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from seq2seq.decoding.model_result import git_state
from seq2seq.device import cpu_has_bf16_instructions

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for bench.py
from bench import bench_path, device_name


def cpu_description() -> str:
    """e.g. "AMD EPYC (2 cores, bf16 instructions), CPU only" (AVX512_BF16 or AMX)."""
    bf16 = ", bf16 instructions" if cpu_has_bf16_instructions() else ""
    return f"{device_name(torch.device('cpu'))} ({os.cpu_count()} cores{bf16}), CPU only"


def record_header(kind: str) -> dict[str, Any]:
    """The fields every peers record starts with: what it is, where, when, from which code."""
    revision, _ = git_state()
    return {
        "kind": kind,
        "device": cpu_description(),
        "threads": 2,
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "git_revision": revision,
    }


def peer_versions(work: Path, *packages: str) -> list[str]:
    """The installed versions of `packages` (e.g. "fairseq-fixed", "OpenNMT-py") in WORK/venv."""
    code = "import importlib.metadata as m, sys; print(*map(m.version, sys.argv[1:]))"
    result = subprocess.run(
        [str(work / "venv" / "bin" / "python"), "-c", code, *packages],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.split()


def default_out(prefix: str) -> Path:
    """results/bench/<prefix>-<cpu>-<time>.json"""
    return bench_path(f"{prefix}-", device_name(torch.device("cpu")))
