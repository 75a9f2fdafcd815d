"""Writing files so that a crash, a full disk or a signal never leaves a half-written one."""

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

TEMP_SUFFIX = ".tmp"  # temporary files are ".<name>.<random>.tmp" beside their target


def write_atomically(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Call `write` on a temporary file beside `path`, fsync it, then rename it over `path`.

    A crash or a failed write at any moment leaves the previous file at `path` intact.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp_name, 0o666 & ~umask)  # mkstemp's 0600 would make checkpoints private
    try:
        with os.fdopen(fd, "wb") as tmp:
            write(tmp)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def remove_temporary_files(folder: Path) -> list[Path]:
    """Delete the temporary files that a killed `write_atomically` left in `folder`."""
    stale = sorted(folder.glob(f".*{TEMP_SUFFIX}"))
    for path in stale:
        path.unlink(missing_ok=True)
    return stale
