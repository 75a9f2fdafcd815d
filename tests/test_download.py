"""Corpus registry checksums, and fetching: local mirror, HTTP mirror, cache, upstream zip."""

import dataclasses
import gzip
import hashlib
import shutil
import socket
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from seq2seq.data.corpora import CORPORA, RemoteFile
from seq2seq.data.download import MAKE_ENV, MIRROR_ENV, fetch, resolve_mirror
from seq2seq.errors import UserError
from seq2seq.files import sha256_file

MULTI30K = CORPORA["multi30k"]
TATOEBA = CORPORA["tatoeba"]
VAL_EN = next(f for f in MULTI30K.remote_files("en", "de") if f.name == "val.en.gz")


def _sha256sums(folder: Path) -> dict[str, str]:
    lines = (folder / "SHA256SUMS").read_text().splitlines()
    return {name: digest for digest, name in (line.split() for line in lines)}


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*")) if folder.exists() else []


def test_registry_checksums_are_the_mirrors(shared_data: Path) -> None:
    sums = _sha256sums(shared_data / MULTI30K.mirror_folder)
    files = [
        f for src, tgt in (("en", "de"), ("fr", "cs")) for f in MULTI30K.remote_files(src, tgt)
    ]
    assert len(files) == 12
    for file in files:
        assert file.sha256 == sums[file.name]
        assert file.url == MULTI30K.base_url + file.name
    assert TATOEBA.file.sha256 == _sha256sums(shared_data / TATOEBA.mirror_folder)["fra.txt.gz"]


def test_local_mirror_is_read_in_place(shared_data: Path, tmp_path: Path) -> None:
    path = fetch(VAL_EN, "multi30k", tmp_path / "cache", mirror=str(shared_data))
    assert path == shared_data / "multi30k" / "val.en.gz"
    assert not (tmp_path / "cache").exists()


def test_local_mirror_with_a_bad_copy_is_refused(shared_data: Path, tmp_path: Path) -> None:
    (tmp_path / "mirror" / "multi30k").mkdir(parents=True)
    bad = tmp_path / "mirror" / "multi30k" / "val.en.gz"
    bad.write_bytes(b"not the real file")
    with pytest.raises(UserError) as err:
        fetch(VAL_EN, "multi30k", tmp_path / "cache", mirror=str(tmp_path / "mirror"))
    message = str(err.value)
    assert str(bad) in message and VAL_EN.sha256 in message and sha256_file(bad) in message
    assert bad.exists()  # the user's mirror is never modified
    (tmp_path / "mirror" / "multi30k" / "val.en.gz").unlink()
    with pytest.raises(UserError, match=r"missing multi30k/val\.en\.gz"):
        fetch(VAL_EN, "multi30k", tmp_path / "cache", mirror=str(tmp_path / "mirror"))


def test_http_mirror_download_verify_and_cache(
    shared_data: Path, tmp_path: Path, http_server: Callable[[Path], str]
) -> None:
    cache = tmp_path / "cache"
    (tmp_path / "bad" / "multi30k").mkdir(parents=True)
    (tmp_path / "bad" / "multi30k" / "val.en.gz").write_bytes(b"corrupted copy")
    bad_url = http_server(tmp_path / "bad")
    with pytest.raises(UserError) as err:
        fetch(VAL_EN, "multi30k", cache, mirror=bad_url)
    message = str(err.value)
    assert "val.en.gz" in message and VAL_EN.sha256 in message
    assert f"got {hashlib.sha256(b'corrupted copy').hexdigest()}" in message
    assert _files_in(cache) == []  # refused and deleted: no partial file, no empty folder

    good_url = http_server(shared_data)
    path = fetch(VAL_EN, "multi30k", cache, mirror=good_url)
    assert path == cache / "multi30k" / "val.en.gz"
    assert sha256_file(path) == VAL_EN.sha256
    assert _files_in(cache) == ["multi30k", "val.en.gz"]

    # Cached: found again without any server (the mirror URL now refuses connections).
    closed = f"http://127.0.0.1:{_unused_port()}"
    assert fetch(VAL_EN, "multi30k", cache, mirror=closed) == path

    # A damaged cached copy is deleted and fetched again.
    path.write_bytes(b"damaged")
    assert sha256_file(fetch(VAL_EN, "multi30k", cache, mirror=good_url)) == VAL_EN.sha256


@pytest.mark.parametrize(
    ("make_target", "option", "advice"),
    [
        ("train", None, "give a mirror: make train MIRROR=DIR_OR_URL"),
        ("data", "--mirror DIR_OR_URL", "give a mirror: make data MIRROR=DIR_OR_URL"),
        (None, "--mirror DIR_OR_URL", "give a mirror: --mirror DIR_OR_URL"),
        (None, None, f"give a mirror: {MIRROR_ENV}=DIR_OR_URL"),
    ],
)
def test_failed_download_without_mirror_says_how_to_give_one(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make_target: str | None,
    option: str | None,
    advice: str,
) -> None:
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    monkeypatch.delenv(MAKE_ENV, raising=False)
    if make_target:
        monkeypatch.setenv(MAKE_ENV, make_target)
    url = f"http://127.0.0.1:{_unused_port()}/val.en.gz"
    unreachable = dataclasses.replace(VAL_EN, url=url)
    with pytest.raises(UserError) as err:
        fetch(unreachable, "multi30k", tmp_path / "downloads", resolve_mirror(None), option)
    message = str(err.value)
    assert url in message and message.endswith(advice)
    assert _files_in(tmp_path) == []  # no empty download folder left behind


def test_mirror_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MIRROR_ENV, "http://127.0.0.1:9/mirror")
    assert resolve_mirror(None) == "http://127.0.0.1:9/mirror"
    assert resolve_mirror("/data/mirror") == "/data/mirror"
    monkeypatch.delenv(MIRROR_ENV)
    assert resolve_mirror(None) is None


def test_upstream_zip_member_is_extracted_and_verified(
    shared_data: Path, tmp_path: Path, http_server: Callable[[Path], str]
) -> None:
    """Tatoeba's upstream is a zip whose text (not its bytes) has a fixed checksum."""
    text = gzip.decompress((shared_data / TATOEBA.mirror_folder / "fra.txt.gz").read_bytes())
    served = tmp_path / "served"
    served.mkdir()
    with zipfile.ZipFile(served / "fra-eng.zip", "w") as zf:
        zf.writestr("fra-eng/_about.txt", "about")
        zf.writestr("fra-eng/fra.txt", text)
    with zipfile.ZipFile(served / "other.zip", "w") as zf:
        zf.writestr("fra-eng/fra.txt", text[:-1000])
    url = http_server(served)
    upstream = dataclasses.replace(TATOEBA.file, url=f"{url}/fra-eng.zip")
    cache = tmp_path / "cache"

    path = fetch(upstream, TATOEBA.mirror_folder, cache)
    assert path == cache / TATOEBA.mirror_folder / "fra.txt"
    assert sha256_file(path) == TATOEBA.file.member_sha256
    assert _files_in(cache) == ["fra.txt", TATOEBA.mirror_folder]  # the zip is gone

    shutil.rmtree(cache)
    truncated = dataclasses.replace(TATOEBA.file, url=f"{url}/other.zip")
    with pytest.raises(UserError, match=f"expected {TATOEBA.file.member_sha256}, got"):
        fetch(truncated, TATOEBA.mirror_folder, cache)
    assert _files_in(cache) == []  # nothing left behind


def test_remote_file_without_zip_downloads_as_is(
    tmp_path: Path, http_server: Callable[[Path], str]
) -> None:
    (tmp_path / "served").mkdir()
    (tmp_path / "served" / "hello.txt").write_text("hello\n")
    url = http_server(tmp_path / "served")
    file = RemoteFile(
        "hello.txt",
        "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03",
        f"{url}/hello.txt",
    )
    path = fetch(file, "greetings", tmp_path / "cache")
    assert path.read_text() == "hello\n"
