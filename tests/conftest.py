"""Shared fixtures: the read-only corpora beside the repository, a prepared Multi30k, and a
local HTTP server for download tests."""

import os
import sys
import threading
from collections.abc import Callable, Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import tiny
import torch
from explorer_models import export_random_gru
from reversal import prepare_reversal

from seq2seq.data.prepare import prepare

if TYPE_CHECKING:
    from playwright.sync_api import Browser

# Test models are tiny, so per-operation overhead dominates: one thread is as fast on an idle
# machine, and an order of magnitude faster when processes share the 2 cores (OpenMP threads
# spin-wait). Scripts that tests start inherit the setting through the environment.
os.environ["OMP_NUM_THREADS"] = "1"
torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[1]
# The corpora beside the checkout, or where SEQ2SEQ_SHARED_DATA names (a checkout elsewhere).
SHARED_DATA = Path(os.environ.get("SEQ2SEQ_SHARED_DATA", ROOT.parent / "shared" / "data"))

# make test runs the suite on two processes (pytest-xdist, --dist worksteal): each takes half of
# the tests in collection order, and one that runs out takes half of the other's remaining tests,
# from the end. So the modules of the longest tests come first, longest first, and the tests left
# to share at the end are short ones. A module's tests stay together (its fixtures are made once).
# The four modules that prepare Multi30k (multi30k_en_de) follow each other, so that the worker
# that runs them prepares it once.
LONGEST_FIRST = [
    "test_train.py",
    "test_benchmark.py",
    "test_compile.py",
    "test_prepare.py",
    "test_tokenizer.py",
    "test_shipped_model.py",
    "test_interruptions.py",
    "test_translate.py",
    "test_serve.py",
    "test_hardening.py",
    "test_export.py",
    "test_docs.py",
    "test_search.py",
    "test_explorer_browser.py",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the modules of LONGEST_FIRST first, in that order; the others keep their order."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


# The benchmarks are scripts that import each other by module name (`import bench`), as they
# do when run from the shell; tests import them the same way.
sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.fixture
def tiny_model() -> Callable[..., torch.nn.Module]:
    """Make a tiny model, seeded: `tiny_model("gru", dropout=0.0)` (see tests/tiny.py)."""
    return tiny.tiny_model


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data` (Multi30k and Tatoeba, laid out as a download mirror)."""
    if not (SHARED_DATA / "multi30k").is_dir():
        pytest.skip(
            f"the shared corpora are not at {SHARED_DATA} (clone next to ../shared, or set "
            "SEQ2SEQ_SHARED_DATA)"
        )
    return SHARED_DATA


@pytest.fixture(scope="module")
def reversal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prepared corpus of the reversal task (tests/reversal.py), once per test module."""
    return prepare_reversal(tmp_path_factory.mktemp("reversal"))


@pytest.fixture(scope="session")
def multi30k_en_de(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Multi30k en-de prepared once per test session with the default settings."""
    out = tmp_path_factory.mktemp("prepared") / "multi30k.en-de"
    return prepare("multi30k", "en", "de", out, mirror=str(shared_data))


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[Callable[[Path], str]]:
    """Start an HTTP server on 127.0.0.1 (ephemeral port) serving a folder; returns its URL."""
    servers: list[ThreadingHTTPServer] = []

    def serve(folder: Path) -> str:
        server = ThreadingHTTPServer(
            ("127.0.0.1", 0), partial(_QuietHandler, directory=str(folder))
        )
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def _small_side(lang: str, count: int, offset: int) -> list[str]:
    words = {
        "en": (["one", "two", "three", "four", "five"], ["red", "green", "big", "old"]),
        "de": (["eins", "zwei", "drei", "vier", "fünf"], ["rot", "grün", "groß", "alt"]),
    }
    things = {"en": ["dog", "cat", "house", "tree"], "de": ["Hund", "Katze", "Haus", "Baum"]}
    numbers, adjectives = words[lang]
    return [
        f"{numbers[i % 5]} {adjectives[i // 5 % 4]} {things[lang][i // 20 % 4]}."
        for i in range(offset, offset + count)
    ]


@pytest.fixture
def small_corpus(tmp_path: Path) -> Path:
    """A tiny en-de corpus in the `{split}.{lang}` layout of `--corpus files --data-dir`.

    train: 80 good pairs, plus one with an empty side and one with a length ratio of 12
    (both cleaned away). valid: 10 pairs, the first in decomposed Unicode with extra spaces.
    test: 10 pairs.
    """
    folder = tmp_path / "small_corpus"
    folder.mkdir()
    sides = {
        "train": {lang: _small_side(lang, 80, 0) for lang in ("en", "de")},
        "valid": {lang: _small_side(lang, 10, 80) for lang in ("en", "de")},
        "test": {lang: _small_side(lang, 10, 90) for lang in ("en", "de")},
    }
    sides["train"]["en"] += ["", "dog"]
    sides["train"]["de"] += ["Hund", " ".join(["Hund"] * 12)]
    sides["valid"]["de"][0] = "  fu\u0308nf   gru\u0308n Hund. "
    for split, by_lang in sides.items():
        for lang, lines in by_lang.items():
            (folder / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def random_gru(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An exported GRU + Bahdanau model with random weights (tests/explorer_models.py)."""
    return export_random_gru(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def browser() -> Iterator["Browser"]:
    """Debian's chromium driven by Playwright, one per test module (the browser tests)."""
    from explore import CHROMIUM, CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} is missing: as root, apt-get install chromium (or make install)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
