"""Reading text files strictly, and writing files so that a crash, a full disk or a signal
never leaves a half-written one."""

import codecs
import glob
import gzip
import hashlib
import json
import os
import shutil
import stat
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from seq2seq.errors import UserError

TEMP_SUFFIX = ".tmp"  # temporary files are ".<name>.<random>.tmp" beside their target


def text_lines(stream: Iterable[bytes], name: str) -> Iterator[str]:
    """The lines of UTF-8 text read from a binary `stream`, without their line ends.

    Only "\\n" ends a line (a "\\r" before it is dropped; any other "\\r", or a U+2028, stays
    in the line), so each input line is one line out and the two sides of a parallel corpus
    stay aligned; a leading byte order mark is dropped. Bytes that are not UTF-8 are a
    `UserError` naming `name` and the line, never silently replaced.
    """
    for number, raw in enumerate(stream, start=1):
        if number == 1:
            raw = raw.removeprefix(codecs.BOM_UTF8)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise UserError(
                f"{name}:{number}: not UTF-8 text (bad byte at byte {err.start + 1} of the line)"
            ) from None
        yield text.removesuffix("\n").removesuffix("\r")


def iter_lines(path: Path, name: str | None = None) -> Iterator[str]:
    """The `text_lines` of a file, plain or `.gz`, one at a time; errors name `name` (by
    default the path), e.g. "--src in.txt"."""
    name = name or str(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as stream:
            yield from text_lines(stream, name)
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise UserError(f"{name}: not a valid gzip file: {err}") from None
    except OSError as err:
        raise UserError(f"{name}: cannot read: {err}") from None


def read_lines(path: Path, name: str | None = None) -> list[str]:
    """All the lines of a text file (see `iter_lines`)."""
    return list(iter_lines(path, name))


def check_regular_file(path: Path, max_bytes: int, name: str | None = None) -> None:
    """Refuse, with a one-line `UserError` naming `name` (by default the path), to read `path`
    when it is not a regular file (e.g. a FIFO, or a link to /dev/zero) or is larger than
    `max_bytes`. It is opened without blocking, so a FIFO cannot hang the check."""
    with _open_regular(path, max_bytes, name or str(path)):
        pass


def read_small_file(path: Path, max_bytes: int, name: str | None = None) -> bytes:
    """The bytes of the regular file `path` of at most `max_bytes` (see `check_regular_file`),
    its size checked before anything is read."""
    name = name or str(path)
    with _open_regular(path, max_bytes, name) as file:
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew while being read
        raise UserError(f"{name}: over the limit of {max_bytes:,} bytes")
    return data


def parse_json(text: bytes | str) -> Any:
    """`json.loads`, with JSON nested deeper than Python's recursion limit (1,000 by default)
    a ValueError like any other bad JSON, not a RecursionError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _open_regular(path: Path, max_bytes: int, name: str) -> BinaryIO:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise UserError(f"{name}: cannot read: {err.strerror}") from None
    file = os.fdopen(fd, "rb")
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        file.close()
        raise UserError(f"{name}: not a regular file; refusing to read it")
    if info.st_size > max_bytes:
        file.close()
        raise UserError(f"{name}: {info.st_size:,} bytes, over the limit of {max_bytes:,}")
    return file


def check_output_location(option: str, path: str | Path) -> Path:
    """Resolve the output `path` given by `option` and check, before any work, that it can be
    written: no loop of symbolic links on the way, and the nearest existing folder above it
    takes new files (tried by making one: this refuses read-only and special file systems such
    as /proc, for root too). Returns the resolved path; a problem is a one-line `UserError`."""
    try:
        resolved = Path(path).resolve()
    except (OSError, RuntimeError):  # RuntimeError: Python's "Symlink loop from ..."
        raise UserError(f"{option} {path}: a loop of symbolic links") from None
    folder = resolved.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UserError(f"{option} {path}: {folder} is not a folder")
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
        raise UserError(f"{option} {path}: cannot write in {folder} ({err.strerror})") from None
    return resolved


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
    _fsync_folder(path.parent)


def staging_folder(target: Path, kind: str) -> Path:
    """A new empty folder beside `target`, `.<name>.<kind>-<pid>-<random>`, to build a
    replacement for `target` in (see `replace_folder`); the pid lets `recover_folder` tell the
    folder of a killed process from one still being built."""
    target.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{target.name}.{kind}-{os.getpid()}-"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))


def replace_folder(new: Path, target: Path) -> None:
    """Put the folder `new` in the place of `target` (which may not exist): `target` is renamed
    to `.<name>.old`, `new` to `target`, then the old folder is deleted. A kill between the two
    renames leaves `target` missing and its old contents whole under `.<name>.old`, which
    `recover_folder` puts back at the next start."""
    old = target.with_name(f".{target.name}.old")
    if target.exists():
        os.rename(target, old)
    os.rename(new, target)
    _fsync_folder(target.parent)
    shutil.rmtree(old, ignore_errors=True)


def recover_folder(target: Path, kind: str) -> list[str]:
    """Undo what a killed `replace_folder` or build left beside `target`, before a new one:
    `.<name>.old` goes back to `target` when `target` is missing, or is deleted when `target`
    is there (the rename had finished); staging folders of `kind` whose process is gone are
    deleted. Returns one line per thing done, for the caller to print."""
    done = []
    old = target.with_name(f".{target.name}.old")
    if old.is_dir() and not target.exists():
        os.rename(old, target)
        done.append(f"{target}: restored from {old.name}, left by an interrupted replacement")
    elif old.is_dir():
        shutil.rmtree(old, ignore_errors=True)
        done.append(f"{target}: deleted {old.name}, left by an interrupted replacement")
    pattern = f".{glob.escape(target.name)}.{kind}-*-*"
    for stale in sorted(target.parent.glob(pattern)):
        pid = stale.name.removeprefix(f".{target.name}.{kind}-").split("-")[0]
        if pid.isdecimal() and not _process_alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
            done.append(f"{target}: deleted {stale.name}, left by an interrupted build")
    return done


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync_folder(folder: Path) -> None:
    dir_fd = os.open(folder, os.O_RDONLY)
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


def sha256_file(path: Path) -> str:
    """The SHA256 of a file's bytes, in hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
