"""One writer per run folder: an exclusive lock that training holds while it runs.

The lock is a POSIX record lock (`fcntl.lockf`) on the empty file `train.lock` in the run
folder (docs/training.md, "Locked"). Unlike `flock`, a record lock belongs to the process alone:
DataLoader workers forked from the trainer do not share it, so a killed trainer's lock is free
at once. A second process names the holder from Linux's /proc/locks.
"""

import errno
import fcntl
import os
import tempfile
from pathlib import Path

from seq2seq.errors import UserError

LOCK_FILE = "train.lock"


class RunFolderLock:
    """`with RunFolderLock(run_dir):` creates `run_dir` if needed and holds its lock; a second
    holder is refused at once with a `UserError` naming the folder and the running process.

    A folder this lock created is removed again when the block fails and the folder holds
    nothing but the lock file (a run refused before it wrote anything leaves no trace).
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.fd: int | None = None
        self.created = False

    def __enter__(self) -> "RunFolderLock":
        try:
            self.created = not self.run_dir.exists()
            self.run_dir.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=self.run_dir).close()  # can files be made here?
            fd = os.open(self.run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise UserError(f"run folder {self.run_dir}: {err.strerror or err}") from None
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = lock_holder(fd)
            os.close(fd)
            if err.errno not in (errno.EAGAIN, errno.EACCES):  # e.g. no locks on this file system
                raise UserError(
                    f"run folder {self.run_dir}: cannot lock it ({err.strerror})"
                ) from None
            raise UserError(
                f"run folder {self.run_dir}: in use by a training process ({holder}); wait for "
                "it to end, or choose another train.run_name (or train.run_dir)"
            ) from None
        self.fd = fd
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc_info: object) -> None:
        if self.fd is None:
            return
        if kind is not None and self.created and os.listdir(self.run_dir) == [LOCK_FILE]:
            (self.run_dir / LOCK_FILE).unlink()
            self.run_dir.rmdir()
        os.close(self.fd)  # releases the lock
        self.fd = None


def lock_holder(fd: int) -> str:
    """Who holds the record lock on the open file `fd`: "pid N" from /proc/locks, whose lines
    read "1: POSIX  ADVISORY  WRITE <pid> <major>:<minor>:<inode> 0 EOF" (hexadecimal device
    numbers); "another process" where that is not known (not Linux)."""
    stat = os.fstat(fd)
    file_id = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    try:
        locks = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return "another process"
    for line in locks.splitlines():
        fields = line.split()  # a process waiting for a lock has "->" as its second field
        if len(fields) > 5 and fields[1] == "POSIX" and fields[5] == file_id:
            return f"pid {fields[4]}"
    return "another process"
