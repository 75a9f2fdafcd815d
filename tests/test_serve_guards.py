"""What keeps one client from starving the others: request bodies that never arrive, requests
that cost too much, heavy clients in the decoding queue, chapters computed in the event loop;
and what keys and proxy headers may do (docs/serve.md, "Reliability")."""

import asyncio
import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import httpx2
import pytest
import torch
from commands import start_server, stop_server
from fastapi.testclient import TestClient

from seq2seq.decoding.model_result import SHIPPED_MODELS
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.serving import chapters, worker
from seq2seq.serving.access import Access, read_keys
from seq2seq.serving.app import create_app
from seq2seq.serving.limits import Limits
from seq2seq.serving.prometheus import Metrics
from seq2seq.serving.registry import ServedModel, served_model
from seq2seq.serving.worker import DecodeOptions, DecodingWorker

MODEL = "transformer-tiny.multi30k.en-de"
HEAVY_LINE = "zq xv " * 30  # 150 pieces
UNLIMITED = "unlimited-key"
NON_ASCII = "clé-ünïcødé"


@pytest.fixture(scope="module")
def models() -> dict[str, ServedModel]:
    inference = load_model(SHIPPED_MODELS / MODEL)
    inference.config.decode.precision = "int8"
    return {MODEL: served_model(MODEL, inference, torch.device("cpu"))}


# --- Cost per request, fair queueing, chapters off the event loop ------------------------------


def test_a_request_over_the_beam_steps_limit_gets_413(models: dict[str, ServedModel]) -> None:
    heavy = {"lines": ["A dog.", HEAVY_LINE], "beam": 16, "max_len_ratio": 10.0}
    with TestClient(create_app(models)) as client:
        answer = client.post("/v1/translate", json=heavy)
        assert (answer.status_code, answer.json()) == (
            413,
            {
                "error": "lines: beam 16 x up to 1520 output pieces (max_len_ratio 10) = 24,320 "
                "beam steps, over this server's limit of 4,000 per request"
            },
        )
        assert client.get("/healthz").json()["queue_lines"] == 0
    pieces = len(models[MODEL].translator.src_tokenizer.encode(["A dog"])[0]) + 1  # with EOS
    limits = Limits(max_beam_steps=16 * (pieces * 10 + 10))  # "A dog" at beam 16, ratio 10
    with TestClient(create_app(models, limits)) as client:
        assert client.post("/v1/translate", json={**heavy, "lines": ["A dog"]}).status_code == 200
        answer = client.post("/v1/translate", json={**heavy, "lines": ["A dog", "A big dog"]})
        assert answer.status_code == 413


def queue_for(served: ServedModel, limits: Limits) -> DecodingWorker:
    return DecodingWorker({MODEL: served}, limits, Metrics())


def test_a_client_with_heavy_requests_waits_behind_the_others(
    models: dict[str, ServedModel],
) -> None:
    """Each batch holds one request here; FIFO would answer h1 h2 h3 n1."""

    async def leaders() -> list[str]:
        queue = queue_for(models[MODEL], Limits(batch_sentences=1, batch_wait_s=0.0))
        heavy, light = DecodeOptions(16, 1, 1.0, 10.0), DecodeOptions(5, 1, 1.0, 1.5)
        for _ in range(3):
            queue.submit(MODEL, [[5, 6]], heavy, client="h", cost=2000)
        queue.submit(MODEL, [[5, 6]], light, client="n", cost=100)
        order = []
        while queue.queued_lines:
            (job,) = queue._next_batch() or []
            order.append(job.client)
        return order

    assert asyncio.run(leaders()) == ["h", "n", "h", "h"]


def test_a_long_batch_lets_other_clients_go_first(
    models: dict[str, ServedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch past its time slice (0 here) decodes the other clients' batch before its next
    step: the request queued after it is answered first."""
    monkeypatch.setattr(worker, "SLICE_S", 0.0)
    served = models[MODEL]
    ids = served.translator.src_tokenizer.encode(["A dog runs in the park."])[0]

    async def answered() -> list[str]:
        queue = queue_for(served, Limits(batch_wait_s=0.0))
        order: list[str] = []
        for client, beam in (("heavy", 8), ("light", 2)):
            future = queue.submit(MODEL, [ids], DecodeOptions(beam, 1, 1.0, 1.5), client=client)
            future.add_done_callback(lambda _, client=client: order.append(client))
        queue._decode(queue._next_batch() or [])
        await asyncio.sleep(0.1)  # the worker settles the futures in the loop
        assert queue.queued_lines == 0
        return order

    assert asyncio.run(answered()) == ["light", "heavy"]


def in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def test_chapter_computations_run_off_the_event_loop(
    models: dict[str, ServedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, bool]] = []

    def watched(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            seen.append((name, in_event_loop()))
            return function(*args, **kwargs)

        return run

    for name in ("train", "nadaraya_watson", "masked_softmax", "seeded"):
        monkeypatch.setattr(chapters, name, watched(name, getattr(chapters, name)))
    name = "first_layer_self_attention"
    monkeypatch.setattr(chapters, name, watched(name, getattr(chapters, name)))
    requests = {
        "nadaraya_watson/fit": {"epochs": 2},
        "nadaraya_watson": {"keys": [1.0, 2.0], "values": [0.0, 1.0], "queries": [1.5],
                            "widths": [1.0]},
        "masked_softmax": {"scores": [[1.0, 2.0]], "valid_lens": [1]},
        "scoring": {"queries": [[1.0, 0.0]], "keys": [[0.0, 1.0]]},
        "multi_head": {},
        "self_attention": {"text": "A dog."},
    }  # fmt: skip
    with TestClient(create_app(models)) as client:
        for chapter, body in requests.items():
            answer = client.post(f"/v1/chapters/{chapter}", json=body)
            assert answer.status_code == 200, (chapter, answer.text)
    assert [in_loop for _, in_loop in seen] == [False] * 6
    assert {name for name, _ in seen} == {
        "train",
        "nadaraya_watson",
        "masked_softmax",
        "seeded",
        "first_layer_self_attention",
    }


# --- Keys: in the query, as UTF-8, checked before the body -------------------------------------


def keyed_client(models: dict[str, ServedModel], keys: dict[str, int | None]) -> TestClient:
    access = Access(keys=keys, require_key=True)
    return TestClient(create_app(models, access=access), base_url="http://localhost:8000")


def test_an_api_key_in_the_query_string_is_read(models: dict[str, ServedModel]) -> None:
    form = {"q": "A dog.", "source": "en", "target": "de"}
    with keyed_client(models, {"k1-secret": None}) as client:
        assert client.post("/translate?api_key=k1-secret", data=form).status_code == 200
        answer = client.post("/translate?api_key=wrong", data=form)
        assert (answer.status_code, answer.json()) == (
            403,
            {"error": "api_key: not a valid API key"},
        )


def test_a_non_ascii_key_of_the_keys_file_works_as_a_bearer_header(
    models: dict[str, ServedModel], tmp_path: Path
) -> None:
    path = tmp_path / "keys"
    path.write_text(f"{NON_ASCII} 0\n", encoding="utf-8")
    with keyed_client(models, read_keys(path)) as client:
        for key, status in ((NON_ASCII, 200), ("clé-ünïcødè", 403), ("cl\xe9", 403)):
            bearer = {"authorization": f"Bearer {key}".encode()}
            answer = client.post("/v1/translate", json={"lines": ["A dog."]}, headers=bearer)
            assert answer.status_code == status, key


async def status_without_a_body(app: Any, headers: dict[str, str], query: bytes = b"") -> int:
    """The status `app` answers a POST whose body never comes (10 s at most)."""
    sent: list[dict] = []

    async def receive() -> dict:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/translate", "raw_path": b"/v1/translate", "root_path": "",
        "query_string": query, "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 5000),
        "headers": [(k.encode(), v.encode()) for k, v in {
            "host": "localhost", "content-type": "application/json", "content-length": "1000",
            **headers}.items()],
    }  # fmt: skip
    await asyncio.wait_for(app(scope, receive, send), 10)
    return sent[0]["status"]


def test_a_key_in_the_head_is_checked_before_the_body(models: dict[str, ServedModel]) -> None:
    app = create_app(models, access=Access(keys={"k1-secret": None}))
    wrong = {"authorization": "Bearer wrong"}
    assert asyncio.run(status_without_a_body(app, wrong)) == 403
    assert asyncio.run(status_without_a_body(app, {}, b"api_key=wrong")) == 403


# --- A real server: slow bodies, proxy headers, the access log ---------------------------------

SLOW_BODIES = 70
CONCURRENCY = 60  # at most 30 connections wait for a body


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    """A server with small limits, and the lines of its log so far."""
    keys = tmp_path_factory.mktemp("keys") / "keys"
    keys.write_text(f"{UNLIMITED} 0\n", encoding="utf-8")
    process, url = start_server(
        "--model", MODEL, "--log-level", "info", "--header-timeout", "3", "--body-timeout", "2",
        "--limit-concurrency", str(CONCURRENCY), "--api-keys", str(keys), "--req-limit", "1",
    )  # fmt: skip
    log: list[str] = []  # uvicorn's access log goes to stdout, the rest to stderr
    for stream in (process.stdout, process.stderr):
        threading.Thread(target=drain, args=(stream, log), daemon=True).start()
    yield url, log
    assert stop_server(process) == 0


def drain(stream: IO[str], log: list[str]) -> None:
    for line in stream:
        log.append(line)


def status_of(sock: socket.socket) -> int:
    """The status of the answer on `sock`, read until the server closes it; 0 for none."""
    answer = b""
    try:
        while chunk := sock.recv(65536):
            answer += chunk
    except ConnectionResetError:  # closed with the request unread
        pass
    sock.close()
    return int(answer.split(b" ", 2)[1]) if answer else 0


@pytest.mark.slow
def test_bodies_that_never_arrive_cannot_hold_the_server(server: tuple[str, list[str]]) -> None:
    """70 requests from 127.0.0.2 that send their head and 1 byte of a 1,000-byte body: past
    half of --limit-concurrency, the new connections of that address are not read, and closed
    at --header-timeout (0: no answer), the others get 408 at --body-timeout, and a normal
    request is answered meanwhile; on main, the server held all of them."""
    url = server[0]
    host, port = url.removeprefix("http://").rsplit(":", 1)
    head = b"POST /v1/translate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    slow = []
    for _ in range(SLOW_BODIES):
        sock = socket.create_connection((host, int(port)), 15, ("127.0.0.2", 0))
        with contextlib.suppress(ConnectionError):  # closed at once: over the address's share
            sock.sendall(head + b"Content-Length: 1000\r\n\r\n{")
        slow.append(sock)
    statuses = []
    while len(statuses) < SLOW_BODIES - CONCURRENCY // 2:  # those past the bound: at once
        ready, _, _ = select.select(slow, [], [], 15)
        assert ready, f"{len(statuses)} of the slow requests answered"
        for sock in ready:
            statuses.append(status_of(sock))
            slow.remove(sock)
    bearer = {"authorization": f"Bearer {UNLIMITED}"}
    answer = httpx2.post(f"{url}/v1/translate", json={"lines": ["A dog."]}, headers=bearer)
    statuses += [status_of(sock) for sock in slow]  # the rest: at --body-timeout
    assert answer.status_code == 200
    assert len(statuses) == SLOW_BODIES
    assert statuses.count(0) >= SLOW_BODIES - CONCURRENCY // 2
    assert set(statuses) <= {0, 408, 503}, statuses  # 503: uvicorn's, while the others close


@pytest.mark.slow
def test_x_forwarded_for_is_ignored_from_proxies_not_named(server: tuple[str, list[str]]) -> None:
    url = server[0]
    statuses = [
        httpx2.post(
            f"{url}/v1/translate",
            json={"lines": ["A dog."]},
            headers={"x-forwarded-for": f"203.0.113.{number}"},
        ).status_code
        for number in (1, 2)
    ]
    assert statuses == [200, 429]  # both from 127.0.0.1, over --req-limit 1


@pytest.mark.slow
def test_a_query_key_is_read_and_never_logged(server: tuple[str, list[str]]) -> None:
    url, log = server
    form = {"q": "A dog.", "source": "en", "target": "de"}
    for _ in range(2):  # over --req-limit 1 without the key
        answer = httpx2.post(f"{url}/translate?api_key={UNLIMITED}&x=1", data=form)
        assert answer.status_code == 200
    deadline = time.monotonic() + 10
    while not any("/translate?" in line for line in log) and time.monotonic() < deadline:
        time.sleep(0.1)
    logged = [line for line in log if "/translate?" in line]
    assert logged and all("/translate?api_key=(hidden)&x=1 HTTP/1.1" in line for line in logged)
    assert not any(UNLIMITED in line for line in log)
