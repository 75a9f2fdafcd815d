"""Hardening of the server and of model files: bounded work per request, work dropped once
nobody waits for it, access checks, one-line errors for malformed HTTP, and files that a kill,
a full disk or a special file cannot damage or hang."""

import json
import logging
import os
import pty
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import torch
from commands import start_server, stop_server
from fastapi.testclient import TestClient

from seq2seq.commands.serve import access_of, parse_args
from seq2seq.decoding.line_translator import Stopped
from seq2seq.decoding.model_result import SHIPPED_MODELS
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.decoding.search import beam_search, greedy_search
from seq2seq.errors import UserError
from seq2seq.files import read_small_file
from seq2seq.serving.access import Access, read_keys
from seq2seq.serving.app import create_app
from seq2seq.serving.explorer import MAX_MAP_WEIGHTS, map_weights
from seq2seq.serving.limits import Limits
from seq2seq.serving.registry import ServedModel, served_model

ROOT = Path(__file__).resolve().parents[1]
MODEL = "transformer-tiny.multi30k.en-de"
MODEL_DIR = SHIPPED_MODELS / MODEL
HEAVY_LINE = "zq xv " * 30  # 150 pieces that the model does not end: it writes to its limit
NO_STEPS_LIMIT = ("--max-beam-steps", str(10**9))  # for the heavy requests these tests need


@pytest.fixture(scope="module")
def models() -> dict[str, ServedModel]:
    inference = load_model(MODEL_DIR)
    inference.config.decode.precision = "int8"
    return {MODEL: served_model(MODEL, inference, torch.device("cpu"))}


@pytest.fixture(scope="module")
def client(models: dict[str, ServedModel]) -> Iterator[TestClient]:
    with TestClient(create_app(models)) as client:
        yield client


# --- Bounded work per request ------------------------------------------------------------------


def test_explain_refuses_maps_over_the_limit_before_decoding(client: TestClient) -> None:
    text = ("A man in a blue shirt is standing on a ladder and cleaning windows and " * 6)[:380]
    request = {"text": text, "beam": 16, "nbest": 16, "all_maps": True}
    answer = client.post("/v1/explain", json=request)
    assert answer.status_code == 413
    (message,) = answer.json().values()
    assert message.startswith("text: ") and "attention weights" in message
    assert message.endswith(f"limit of {MAX_MAP_WEIGHTS:,}; send a shorter text or all_maps false")
    assert client.get("/healthz").json()["queue_lines"] == 0  # nothing was queued

    answer = client.post("/v1/explain", json={**request, "all_maps": False, "nbest": 1})
    assert answer.status_code == 200
    maps = answer.json()["hypotheses"][0]["maps"]
    assert set(maps) == {"encoder_self", "decoder_self", "cross"}


def test_map_weights_counts_every_map_of_a_transformer(models: dict[str, ServedModel]) -> None:
    model = models[MODEL].translator.model
    src_ids = torch.tensor([[5, 6, 7, 2]])
    maps = model.attention_maps(src_ids, torch.tensor([4]), torch.tensor([[1, 8, 9]]))
    assert map_weights(model, 4, 3) == sum(weights.numel() for weights in maps.values())


def largest_allowed_text(served: ServedModel) -> str:
    """The longest text of HEAVY_LINE's words whose 16 hypotheses' maps fit the explorer's
    limit: the model writes to its length limit, so the maps are as large as allowed."""
    translator = served.translator
    cfg = translator.decode_cfg
    words = 1
    while True:
        text = " ".join(HEAVY_LINE.split()[: words + 1])
        pieces = len(translator.src_tokenizer.encode([text])[0]) + 1
        longest = int(pieces * cfg.max_len_ratio) + cfg.max_len_const + 1
        if 16 * map_weights(translator.model, pieces, longest) > MAX_MAP_WEIGHTS:
            return " ".join(HEAVY_LINE.split()[:words])
        words += 1


@pytest.mark.slow
def test_two_worst_allowed_explain_requests_stay_under_1_gb(
    models: dict[str, ServedModel],
) -> None:
    text = largest_allowed_text(models[MODEL])
    process, url = start_server(
        "--model", MODEL, "--log-level", "warning", "--timeout", "120", *NO_STEPS_LIMIT
    )
    try:
        request = {"text": text, "beam": 16, "nbest": 16, "all_maps": True}
        statuses: list[int] = []

        def explain() -> None:
            statuses.append(httpx2.post(f"{url}/v1/explain", json=request, timeout=180).status_code)

        threads = [threading.Thread(target=explain) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        status = Path(f"/proc/{process.pid}/status").read_text()
        peak_kb = int(
            next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]
        )
    finally:
        assert stop_server(process) == 0
    assert statuses == [200, 200]
    assert peak_kb < 1024 * 1024, f"peak RSS {peak_kb} kB"
    print(f"peak RSS {peak_kb / 1024:.0f} MiB")


# --- Work stops when nobody waits for it -------------------------------------------------------


class StopAfter:
    """A `should_stop` that lets `steps` steps run, counting its calls."""

    def __init__(self, steps: int):
        self.steps = steps
        self.calls = 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.calls > self.steps


def test_a_search_stops_before_the_step_should_stop_refuses(tiny_model) -> None:
    model = tiny_model("transformer").eval()
    src, src_lens, max_lens = torch.tensor([[5, 6, 7, 2]]), torch.tensor([4]), torch.tensor([50])
    for search, args in ((beam_search, (4, max_lens)), (greedy_search, (max_lens,))):
        should_stop = StopAfter(3)
        with pytest.raises(Stopped):
            search(model, src, src_lens, *args, should_stop=should_stop)
        assert should_stop.calls == 4


@pytest.mark.slow
def test_a_timed_out_request_stops_decoding(
    models: dict[str, ServedModel], caplog: pytest.LogCaptureFixture
) -> None:
    """A request that decodes past its limit is dropped by the worker at its next step: the
    worker says so, and a short request sent after the 504 is answered within its own limit
    (the heavy line alone decodes for over a minute)."""
    limits = Limits(timeout_s=2.0, max_beam_steps=10**9)
    with TestClient(create_app(models, limits)) as client:
        heavy = {"lines": [HEAVY_LINE], "beam": 16, "max_len_ratio": 10.0}
        with caplog.at_level(logging.INFO, logger="seq2seq.serving.worker"):
            answer = client.post("/v1/translate", json=heavy)
            assert answer.status_code == 504
            answer = client.post("/v1/translate", json={"lines": ["A dog runs."]})
    assert answer.status_code == 200
    dropped = "dropped a batch of 1 lines: nobody waits for it any more"
    assert dropped in [record.getMessage() for record in caplog.records]


@pytest.mark.slow
def test_a_request_whose_client_left_stops_decoding(models: dict[str, ServedModel]) -> None:
    process, url = start_server(
        "--model", MODEL, "--log-level", "warning", "--timeout", "60", *NO_STEPS_LIMIT
    )
    try:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        body = json.dumps({"lines": [HEAVY_LINE], "beam": 16, "max_len_ratio": 10.0}).encode()
        with socket.create_connection((host, int(port))) as sock:
            head = f"POST /v1/translate HTTP/1.1\r\nHost: {host}\r\n"
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            sock.sendall(head.encode() + body)
            time.sleep(1.0)
        started = time.monotonic()
        answer = httpx2.post(f"{url}/v1/translate", json={"lines": ["A dog runs."]}, timeout=60)
        waited = time.monotonic() - started
    finally:
        assert stop_server(process) == 0
    assert answer.status_code == 200
    # the heavy line alone decodes for over a minute (longer under load, as this request does)
    assert waited < 20.0


# --- make serve and make explore ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("target", ["serve", "explore"])
def test_make_serve_and_explore_exit_0_on_ctrl_c(target: str) -> None:
    """Ctrl-C typed in a terminal: the SIGINT goes to the terminal's foreground process group."""
    command = ["make", "-s", "-o", ".venv/.installed", target, "ARGS=--port 0"]
    if target == "serve":
        command.append(f"SERVE_MODELS={MODEL}")
    pid, terminal = pty.fork()
    if pid == 0:  # the child: make, in the terminal
        os.chdir(ROOT)
        os.execvp("make", command)
    output = b""
    deadline = time.monotonic() + 120
    while b"serving " not in output and time.monotonic() < deadline:
        output += os.read(terminal, 4096)
    time.sleep(0.5)
    os.write(terminal, b"\x03")  # Ctrl-C
    _, status = os.waitpid(pid, 0)
    os.close(terminal)
    assert b"serving " in output, output.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0


# --- Access: hosts, origins, keys, rate limits, headers ----------------------------------------

KEYS = {"k1-secret": 2, "k2-secret": None}


def access_client(models: dict[str, ServedModel], **changes: object) -> TestClient:
    access = Access(**{"keys": KEYS, "per_minute": 1, **changes})
    return TestClient(create_app(models, access=access), base_url="http://localhost:8000")


def test_a_host_not_allowed_gets_421(models: dict[str, ServedModel]) -> None:
    with access_client(models) as client:
        answer = client.get("/healthz", headers={"host": "rebound.example:8000"})
        assert answer.status_code == 421
        assert answer.json() == {
            "error": "Host rebound.example: not served here; allowed: 127.0.0.1, ::1, "
            "localhost (--allowed-host)"
        }
        for host in ("localhost:8000", "127.0.0.1", "[::1]:8000", "LOCALHOST"):
            assert client.get("/healthz", headers={"host": host}).status_code == 200


def test_a_cross_site_post_is_refused(models: dict[str, ServedModel]) -> None:
    form = {"q": "A dog.", "source": "en", "target": "de"}
    with access_client(models, per_minute=0) as client:
        answer = client.post("/translate", data=form, headers={"origin": "http://evil.example"})
        assert answer.status_code == 403
        assert answer.json() == {
            "error": "Origin http://evil.example: cross-site requests are refused"
        }
        answer = client.post("/translate", data=form, headers={"sec-fetch-site": "cross-site"})
        assert answer.status_code == 403
        answer = client.post("/translate", data=form, headers={"origin": "null"})
        assert answer.status_code == 403
        answer = client.post("/translate", data=form, headers={"origin": "http://localhost:8000"})
        assert answer.status_code == 200


def test_api_keys_and_rate_limits(models: dict[str, ServedModel]) -> None:
    request = {"q": "A dog.", "source": "en", "target": "de"}
    with access_client(models) as client:
        for wrong in ("wrong", "k1-secrét"):
            answer = client.post("/translate", json={**request, "api_key": wrong})
            assert (answer.status_code, answer.json()) == (
                403,
                {"error": "api_key: not a valid API key"},
            )
        bearer = {"authorization": "Bearer k1-secret"}
        statuses = [client.post("/translate", json=request, headers=bearer) for _ in range(3)]
        assert [answer.status_code for answer in statuses] == [200, 200, 429]
        assert statuses[-1].json() == {
            "error": "over the limit of 2 requests per minute for this API key"
        }
        assert 1 <= int(statuses[-1].headers["retry-after"]) <= 60
        key_field = [client.post("/translate", json={**request, "api_key": "k2-secret"})]
        key_field.append(client.post("/translate", json={**request, "api_key": "k2-secret"}))
        assert [answer.status_code for answer in key_field] == [200, 429]  # --req-limit: 1
        anonymous = [client.post("/v1/translate", json={"lines": ["A cat."]}) for _ in range(2)]
        assert [answer.status_code for answer in anonymous] == [200, 429]
        assert "secret" not in "".join(a.text for a in [*statuses, *key_field, *anonymous])
    with access_client(models, require_key=True, per_minute=0) as client:
        answer = client.post("/v1/translate", json={"lines": ["A cat."]})
        assert answer.status_code == 403
        assert answer.json()["error"].startswith("api_key: this server needs an API key")
        answer = client.post("/v1/translate", json={"lines": ["A cat."]}, headers=bearer)
        assert answer.status_code == 200


def test_a_keys_file_is_read_strictly(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("# team keys\nalpha 30\n\nbeta\n", encoding="utf-8")
    assert read_keys(keys) == {"alpha": 30, "beta": None}
    keys.write_text("alpha 30\nbeta many\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"^--api-keys .*keys:2: expected KEY or KEY REQUESTS"):
        read_keys(keys)


def test_security_headers_on_every_answer(client: TestClient) -> None:
    for answer in (client.get("/"), client.get("/no-such-page"), client.get("/healthz")):
        headers = answer.headers
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert "default-src 'self'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["x-frame-options"] == "DENY"


def test_docs_are_served_from_local_files(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200
    assert "https://" not in page.text and "http://" not in page.text
    assert 'src="/docs/swagger-ui-bundle.js"' in page.text
    assert "cdn" not in page.text
    script = client.get("/docs/swagger-ui-bundle.js")
    assert script.status_code == 200 and "SwaggerUIBundle" in script.text
    assert client.get("/docs/swagger-ui.css").status_code == 200
    assert client.get("/docs/../app.py").status_code == 404
    assert client.get("/redoc").status_code == 404


# --- Every error one line of JSON ---------------------------------------------------------------


def test_bad_bodies_get_one_line_json(client: TestClient) -> None:
    body = b'{"lines": ["A dog."]}'
    answer = client.post("/v1/translate", content=body)  # no Content-Type
    assert (answer.status_code, answer.json()) == (
        415,
        {"error": "Content-Type: missing; send application/json"},
    )
    nested = "[" * 100_000 + "]" * 100_000
    json_type = {"content-type": "application/json"}
    for path in ("/translate", "/v1/translate"):
        answer = client.post(path, content=nested, headers=json_type)
        assert answer.status_code == 400, path
        assert list(answer.json()) == ["error"]
    surrogate = b'{"lines": ["A \\ud800 dog."]}'
    answer = client.post("/v1/translate", content=surrogate, headers=json_type)
    assert (answer.status_code, answer.json()) == (
        422,
        {"error": "lines[0]: a lone surrogate at character 3"},
    )
    surrogate = b'{"q": "A \\udc00", "source": "en", "target": "de"}'
    answer = client.post("/translate", content=surrogate, headers=json_type)
    assert (answer.status_code, answer.json()) == (
        422,
        {"error": "q[0]: a lone surrogate at character 3"},
    )
    answer = client.put("/v1/translate", json={})
    assert (answer.status_code, answer.json()) == (
        405,
        {"error": "PUT /v1/translate: method not allowed"},
    )


def raw_exchange(url: str, request: bytes, timeout: float = 10.0) -> bytes:
    """Send `request` as it is on a new connection; the server's whole answer."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def status_and_body(answer: bytes) -> tuple[int, dict]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    process, url = start_server("--model", MODEL, "--log-level", "warning", "--header-timeout", "2")
    yield url
    assert stop_server(process) == 0


@pytest.mark.slow
def test_malformed_http_gets_a_4xx_with_one_line_of_json(server: str) -> None:
    long_line = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Long: " + b"a" * 100_000
    status, body = status_and_body(raw_exchange(server, long_line + b"\r\n\r\n"))
    assert status in (400, 431) and list(body) == ["error"]
    status, body = status_and_body(
        raw_exchange(server, b"GET /healthz HTTP/9.9\r\nHost: localhost\r\n\r\n")
    )
    assert (status, body) == (505, {"error": "HTTP/9.9: send HTTP/1.1"})
    framing = b"POST /v1/translate HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1x\r\n\r\n{}"
    status, body = status_and_body(raw_exchange(server, framing))
    assert status == 400 and body["error"].startswith("malformed HTTP request")
    chunked = b"POST /v1/translate HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
    status, body = status_and_body(raw_exchange(server, chunked + b"\r\nzz\r\n{}\r\n0\r\n\r\n"))
    assert status == 400 and body["error"].startswith("malformed HTTP request")
    rebound = b"GET /healthz HTTP/1.1\r\nHost: rebound.example\r\n\r\n"
    assert status_and_body(raw_exchange(server, rebound))[0] == 421


@pytest.mark.slow
def test_slow_clients_cannot_hold_the_server(server: str) -> None:
    """200 clients that never finish their headers: a normal client is answered, and the server
    closes their connections after --header-timeout (2 s here)."""
    host, port = server.removeprefix("http://").rsplit(":", 1)
    slow = []
    for _ in range(200):
        sock = socket.create_connection((host, int(port)), timeout=15)
        sock.sendall(b"POST /v1/translate HTTP/1.1\r\nHost: localhost\r\n")
        slow.append(sock)
    try:
        answer = httpx2.post(f"{server}/v1/translate", json={"lines": ["A dog."]}, timeout=15)
        assert answer.status_code == 200
        closed = sum(sock.recv(1024) == b"" for sock in slow)  # blocks until the server closes
    finally:
        for sock in slow:
            sock.close()
    assert closed == 200


# --- Model folders: regular files only, size-capped --------------------------------------------


@pytest.mark.parametrize("name", ["model.json", "sentencepiece.model", "model.safetensors"])
@pytest.mark.parametrize("special", ["dev-zero", "fifo"])
def test_a_special_file_in_a_model_folder_is_refused_at_once(
    tmp_path: Path, name: str, special: str
) -> None:
    folder = tmp_path / "model"
    shutil.copytree(MODEL_DIR, folder)
    (folder / name).unlink()
    if special == "fifo":
        os.mkfifo(folder / name)
    else:
        (folder / name).symlink_to("/dev/zero")
    with pytest.raises(UserError) as caught:
        load_model(folder)
    assert str(caught.value) == f"{folder / name}: not a regular file; refusing to read it"


def test_a_file_over_its_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * 1001)
    with pytest.raises(UserError, match=r"^--x .*big: 1,001 bytes, over the limit of 1,000$"):
        read_small_file(path, 1000, f"--x {path}")
    assert read_small_file(path, 1001) == b"x" * 1001


def test_access_options_are_checked_at_start(tmp_path: Path) -> None:
    model = ["--model", MODEL]
    with pytest.raises(UserError, match=r"^--require-api-key: give the keys with --api-keys"):
        access_of(parse_args([*model, "--require-api-key"]), "127.0.0.1")
    with pytest.raises(UserError, match=r"^--api-keys .*missing: cannot read"):
        access_of(parse_args([*model, "--api-keys", str(tmp_path / "missing")]), "127.0.0.1")
    keys = tmp_path / "keys"
    keys.write_text("alpha 5\n", encoding="utf-8")
    args = parse_args([*model, "--host", "0.0.0.0", "--allowed-host", "mt.example", "--api-keys",
                       str(keys), "--require-api-key", "--req-limit", "30"])  # fmt: skip
    assert access_of(args, args.host) == Access(
        allowed_hosts=frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0", "mt.example"}),
        keys={"alpha": 5},
        require_key=True,
        per_minute=30,
    )
