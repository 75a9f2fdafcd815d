"""The malloc settings made when seq2seq is imported (seq2seq/allocator.py)."""

import os
import subprocess
import sys

import pytest

from seq2seq.allocator import is_glibc

# Each round allocates three 20 MiB blocks (the size of a beam step's fp32 log-probabilities),
# fills and frees them, and prints the page faults the round took. By default glibc maps them
# afresh the first time, serves them from its heap afterwards, but hands the heap's free top
# back to the kernel when it exceeds twice the block size, so every round faults again.
PAGES = 3 * (20 << 20) // 4096  # 4 KiB pages in one round's blocks
ROUNDS = """
import ctypes, resource
import seq2seq
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


def page_faults_per_round(env: dict[str, str]) -> list[int]:
    result = subprocess.run(
        [sys.executable, "-c", ROUNDS], env=env, capture_output=True, text=True, check=True
    )
    return [int(line) for line in result.stdout.split()]


@pytest.mark.skipif(not is_glibc(), reason="the settings are glibc's")
def test_freed_memory_is_reused_without_page_faults(monkeypatch) -> None:
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    first, *later = page_faults_per_round(dict(os.environ))
    assert first > PAGES * 9 // 10  # the first round faults: the count measures what we mean
    assert max(later) < PAGES // 100


@pytest.mark.skipif(not is_glibc(), reason="the settings are glibc's")
def test_a_users_malloc_settings_are_kept(monkeypatch) -> None:
    monkeypatch.setenv("GLIBC_TUNABLES", "")
    assert min(page_faults_per_round(dict(os.environ))) > PAGES * 9 // 10
