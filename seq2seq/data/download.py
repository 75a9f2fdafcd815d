"""Fetch a corpus file into the download cache, from upstream or from a mirror, checksum-verified.

A mirror replaces the upstream location and is laid out as `<mirror>/<corpus folder>/<file>`:

    a local folder    files are read in place (checksum-verified, never copied or deleted)
    an http(s) URL    files are downloaded into the cache like upstream ones

It is given with `--mirror DIR_OR_URL` or the environment variable `SEQ2SEQ_DATA_MIRROR`.
Downloads go to a temporary file that is renamed once complete and verified, so the cache
(`data/downloads/<corpus folder>/<file>`) only ever holds whole, correct files; a file whose
checksum does not match is deleted.
"""

import hashlib
import http.client
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tqdm import tqdm

from seq2seq.data.corpora import RemoteFile
from seq2seq.errors import UserError
from seq2seq.files import sha256_file

MIRROR_ENV = "SEQ2SEQ_DATA_MIRROR"
MAKE_ENV = "SEQ2SEQ_MAKE_TARGET"  # set by the Makefile to the target it runs, e.g. "train"
TIMEOUT_SECONDS = 30
_CHUNK = 1 << 16


def resolve_mirror(mirror: str | None) -> str | None:
    """The mirror to use: the one given, else `$SEQ2SEQ_DATA_MIRROR`, else None (upstream)."""
    return mirror or os.environ.get(MIRROR_ENV) or None


def mirror_advice(option: str | None = None) -> str:
    """How the user gives a mirror, in the form that fits how they ran us: `make <target>
    MIRROR=...` under make, else `option` (e.g. the script's "--mirror DIR_OR_URL"), else the
    environment variable."""
    target = os.environ.get(MAKE_ENV)
    if target:
        return f"make {target} MIRROR=DIR_OR_URL"
    return option or f"{MIRROR_ENV}=DIR_OR_URL"


def is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


def fetch(
    file: RemoteFile,
    folder: str,
    cache_dir: Path,
    mirror: str | None = None,
    mirror_option: str | None = None,
) -> Path:
    """A local copy of `file` whose SHA256 has been checked: from a local mirror, the cache,
    a mirror URL or upstream, in that order. `folder` is the corpus's mirror/cache folder;
    `mirror_option` how the caller's user gives a mirror (see `mirror_advice`).
    """
    if mirror and not is_url(mirror):
        return _from_local_mirror(file, Path(mirror) / folder)
    cached = _cached_copy(file, cache_dir / folder)
    if cached is not None:
        return cached
    with removing_new_empty_dirs([cache_dir / folder]):
        return _fetch_remote(file, folder, cache_dir, mirror, mirror_option)


def _fetch_remote(
    file: RemoteFile, folder: str, cache_dir: Path, mirror: str | None, mirror_option: str | None
) -> Path:
    target = cache_dir / folder / file.name
    if mirror:
        url = f"{mirror.rstrip('/')}/{folder}/{file.name}"
        hint = f"check the mirror {mirror} (laid out as <mirror>/{folder}/{file.name})"
        _download(url, target, file.sha256, failure_hint=hint)
        return target
    hint = f"to use a copy of the data, give a mirror: {mirror_advice(mirror_option)}"
    if file.zip_member is None:
        _download(file.url, target, file.sha256, failure_hint=hint)
        return target
    return _download_zip_member(file, cache_dir / folder, failure_hint=hint)


@contextmanager
def removing_new_empty_dirs(paths: list[Path]) -> Iterator[None]:
    """On failure, remove the folders of `paths` (and their parents) that the block created and
    left empty, so that a failed first run leaves nothing behind."""
    new = {parent for path in paths for parent in (path, *path.parents) if not parent.exists()}
    try:
        yield
    except BaseException:
        for folder in sorted(new, key=lambda p: len(p.parts), reverse=True):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        raise


def _from_local_mirror(file: RemoteFile, folder: Path) -> Path:
    path = folder / file.name
    if not path.is_file():
        raise UserError(f"mirror {folder.parent}: missing {folder.name}/{file.name}")
    got = sha256_file(path)
    if got != file.sha256:
        raise UserError(f"{path}: SHA256 mismatch: expected {file.sha256}, got {got}")
    return path


def _cached_copy(file: RemoteFile, folder: Path) -> Path | None:
    """The cached copy of `file` (as the mirror holds it, or as extracted from upstream's zip)
    when its checksum matches; a damaged copy is deleted."""
    candidates = [(folder / file.name, file.sha256)]
    if file.zip_member is not None:
        candidates.append((folder / Path(file.zip_member).name, file.member_sha256))
    for path, sha256 in candidates:
        if path.is_file():
            if sha256_file(path) == sha256:
                return path
            print(f"{path}: checksum mismatch, deleting it and fetching it again")
            path.unlink()
    return None


def _download(url: str, target: Path, sha256: str | None, failure_hint: str) -> None:
    """Download `url` to `target` through a temporary file that is renamed once complete.

    With `sha256` given, a download with another checksum is deleted and refused.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, part_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    part = Path(part_name)
    digest = hashlib.sha256()
    try:
        with (
            os.fdopen(fd, "wb") as out,
            urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response,
        ):
            size = response.headers.get("Content-Length")
            with tqdm(
                total=int(size) if size else None,
                unit="B",
                unit_scale=True,
                desc=f"downloading {target.name}",
                disable=None,
            ) as bar:
                while chunk := response.read(_CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
        got = digest.hexdigest()
        if sha256 is not None and got != sha256:
            raise UserError(
                f"{target.name} from {url}: SHA256 mismatch: expected {sha256}, got {got}; "
                "the downloaded file was deleted"
            )
    except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
        part.unlink(missing_ok=True)
        reason = getattr(err, "reason", None) or err
        raise UserError(f"could not download {url}: {reason}; {failure_hint}") from None
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    os.replace(part, target)


def _download_zip_member(file: RemoteFile, folder: Path, failure_hint: str) -> Path:
    """Download upstream's zip, extract `file.zip_member` into `folder` and verify its text.

    The archive's own bytes have no fixed checksum (it has been re-packed over time), so the
    checksum checked is that of the extracted member.
    """
    target = folder / Path(file.zip_member).name
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        archive = Path(tmp) / Path(file.url).name
        _download(file.url, archive, None, failure_hint)
        extracted = Path(tmp) / target.name
        try:
            with (
                zipfile.ZipFile(archive) as zf,
                zf.open(file.zip_member) as member,
                open(extracted, "wb") as out,
            ):
                shutil.copyfileobj(member, out)
        except (zipfile.BadZipFile, KeyError) as err:
            raise UserError(f"{file.url}: no {file.zip_member} in the archive: {err}") from None
        got = sha256_file(extracted)
        if got != file.member_sha256:
            raise UserError(
                f"{file.zip_member} in {file.url}: SHA256 mismatch: expected "
                f"{file.member_sha256}, got {got}; the downloaded file was deleted"
            )
        os.replace(extracted, target)
    return target
