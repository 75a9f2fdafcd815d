"""What the benchmarks share: the machine's name, the clock, memory readings, a fresh process
per measurement, and the JSON records they write to results/bench."""

import json
import multiprocessing
import os
import platform
import re
import resource
import shlex
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from seq2seq.decoding.model_result import git_state
from seq2seq.device import cpu_has_bf16_instructions
from seq2seq.errors import UserError
from seq2seq.fast.process import tune_process

MIB = 2**20
SYNC_WARNING = "called a synchronizing CUDA operation"  # the warning of the sync debug mode


# ---------------------------------------------------------------------------------------------
# The machine
# ---------------------------------------------------------------------------------------------


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model name from /proc/cpuinfo."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_name(device: torch.device) -> str:
    """The GPU's name, or "cpu": the "device" field of the GPU benchmarks' records."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def cpu_description() -> str:
    """e.g. "AMD EPYC (2 cores, bf16 instructions), CPU only" (AVX512_BF16 or AMX)."""
    bf16 = ", bf16 instructions" if cpu_has_bf16_instructions() else ""
    return f"{device_name(torch.device('cpu'))} ({os.cpu_count()} cores{bf16}), CPU only"


def environment(device: torch.device) -> dict[str, Any]:
    """Where and how the results were obtained."""
    revision, dirty = git_state()
    return {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": shlex.join(["python", *sys.argv]),
        "device": str(device),
        "device_name": device_name(device),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "git_revision": revision,
        "git_dirty": dirty,
        "memory_measure": "torch.cuda.max_memory_allocated"
        if device.type == "cuda"
        else "peak RSS of the process (getrusage ru_maxrss)",
    }


def record_header(kind: str) -> dict[str, Any]:
    """The fields a CPU record of the peers and the explorer starts with: what it is, where,
    when, from which code."""
    revision, _ = git_state()
    return {
        "kind": kind,
        "device": cpu_description(),
        "threads": 2,
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "git_revision": revision,
    }


# ---------------------------------------------------------------------------------------------
# Time and memory
# ---------------------------------------------------------------------------------------------


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work, so that a clock read afterwards includes it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """`fn(*args, **kwargs)` and the wall-clock seconds it took."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def median_seconds(fn: Callable[[], object], repeats: int, device: torch.device) -> float:
    """The median wall-clock time of `repeats` calls of `fn`, after one untimed call."""
    fn()
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def max_rss_mib() -> float:
    """The peak resident set size of this process so far (it never decreases)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (MIB if sys.platform == "darwin" else 1024)  # bytes on macOS, KiB on Linux


def status_mib(status: str, field: str = "VmRSS") -> float:
    """A memory field ("VmRSS", "RssAnon") of a /proc/PID/status text, in MiB (Linux)."""
    for line in status.splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise UserError(f"no {field} in /proc/PID/status: the memory figures need Linux")


def rss_mib(pid: int | str = "self") -> float:
    """The resident memory of process `pid` (default: this one) now, in MiB (Linux)."""
    return status_mib(Path(f"/proc/{pid}/status").read_text())


def memory_start(device: torch.device) -> float:
    """Start a peak-memory measurement; returns the baseline in MiB."""
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return torch.cuda.memory_allocated(device) / MIB
    return max_rss_mib()


def memory_report(device: torch.device, baseline: float) -> dict[str, float]:
    """The peak since `memory_start` and its increase over the baseline, in MiB."""
    synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) / MIB if device.type == "cuda" else max_rss_mib()
    return {"peak_mib": peak, "increase_mib": peak - baseline}


@contextmanager
def sync_warnings(device: torch.device) -> Iterator[list[warnings.WarningMessage]]:
    """The warnings of the block, with CUDA's sync debug mode warning at every operation that
    makes the host wait for the GPU (SYNC_WARNING); on a CPU nothing waits."""
    cuda = device.type == "cuda"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if cuda:
            torch.cuda.set_sync_debug_mode("warn")
        try:
            yield caught
        finally:
            if cuda:
                torch.cuda.set_sync_debug_mode("default")


def syncs_in(caught: list[warnings.WarningMessage]) -> int:
    """How many of `caught` are the sync debug mode's warnings."""
    return sum(SYNC_WARNING in str(w.message) for w in caught)


def in_fresh_process(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in a new Python process, so that its peak memory is its own."""
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=spawn, initializer=tune_process) as pool:
        try:
            return pool.submit(fn, *args).result()
        except BrokenProcessPool:
            raise UserError(f"{fn.__name__}: the measuring process died (out of memory?)") from None


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------


def bench_path(prefix: str, device: str) -> Path:
    """results/bench/<prefix><device, as a slug>-<time>.json"""
    slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")
    return Path("results/bench") / f"{prefix}{slug[:40]}-{time.strftime('%Y%m%d-%H%M%S')}.json"


def default_out(prefix: str) -> Path:
    """results/bench/<prefix>-<cpu>-<time>.json"""
    return bench_path(f"{prefix}-", device_name(torch.device("cpu")))


def write_record(record: dict[str, Any], out: Path) -> None:
    """Write `record` to `out` as indented JSON, making its folder where missing."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
