"""Process settings for training and decoding on a CPU: oneDNN's kernel cache, glibc's malloc.

The command line (`seq2seq.commands`) calls `tune_process` before any computation; the library
never does (importing it changes nothing in the process). Figures: docs/benchmarks.md.
"""

import ctypes
import os


def tune_process() -> None:
    """Cap oneDNN's kernel cache and keep freed memory in the process (`keep_freed_memory`).

    oneDNN, which runs torch's bf16 matrix multiplies on a CPU, keeps a compiled kernel for every
    shape it has seen, up to 1,024 by default. Token-budget batches bring new shapes almost every
    step, and that cache grows the peak memory of a bf16 training process; 16 entries cost no
    speed that could be measured. oneDNN reads the variable once, at its first kernel, so call
    this before any computation. A value set in the environment is kept."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "16")
    keep_freed_memory()


M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 1 << 30

# glibc's environment variables for the same settings: when the user set one, theirs stands.
USER_MALLOC_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


def is_glibc() -> bool:
    """Whether this process runs on glibc (most Linux systems; not macOS, Windows or musl)."""
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (AttributeError, ValueError, OSError):
        return False


def keep_freed_memory() -> bool:
    """Raise glibc's mmap threshold to 32 MiB and its trim threshold to 1 GiB.

    torch allocates a CPU tensor with malloc. glibc serves a large request (from 128 KiB, rising
    to the largest size freed so far, at most 32 MiB) with a fresh mmap and gives it back to the
    kernel on free, and it returns the free top of its heap to the kernel beyond a threshold.
    Every training step and decoder step allocates and frees the same large tensors (a beam
    step's (640, 8000) log-probabilities are 20 MB), so each time the kernel hands out zeroed
    pages again, one page fault per 4 KiB.

    Serving every request below 32 MiB (glibc's own upper bound for that threshold) from the
    heap and keeping up to 1 GiB of free heap removes most of those faults at the same peak
    memory. Serving requests up to 1 GiB from the heap as well (the logits of a training batch
    are 45-90 MB) is faster still but raises the peak memory (docs/benchmarks.md).

    Returns False where not done: not glibc, or the user set malloc's thresholds in the
    environment."""
    if not is_glibc() or any(name in os.environ for name in USER_MALLOC_SETTINGS):
        return False
    libc = ctypes.CDLL(None)
    return bool(
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
