"""Hardening of the server and of model files: bounded work per request, work dropped once
nobody waits for it, access checks, one-line errors for malformed HTTP, and files that a kill,
a full disk or a special file cannot damage or hang."""

import json
import os
import pty
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch
from commands import SEQ2SEQ
from fastapi.testclient import TestClient

from seq2seq.decoding.loading import CARD, SHIPPED_MODELS, load_exported
from seq2seq.decoding.search import Stopped, beam_search, greedy_search
from seq2seq.serving.app import create_app
from seq2seq.serving.explorer import MAX_MAP_WEIGHTS, map_weights
from seq2seq.serving.limits import Limits
from seq2seq.serving.registry import ServedModel, served_model

ROOT = Path(__file__).resolve().parents[1]
MODEL = "transformer-tiny.multi30k.en-de"
MODEL_DIR = SHIPPED_MODELS / MODEL
HEAVY_LINE = "zq xv " * 30  # 150 pieces that the model does not end: it writes to its limit


@pytest.fixture(scope="module")
def models() -> dict[str, ServedModel]:
    inference = load_exported(MODEL_DIR)
    inference.config.decode.precision = "int8"
    return {MODEL: served_model(MODEL, inference, torch.device("cpu"), MODEL_DIR / CARD)}


@pytest.fixture(scope="module")
def client(models: dict[str, ServedModel]) -> Iterator[TestClient]:
    with TestClient(create_app(models)) as client:
        yield client


def start_server(*args: str) -> tuple[subprocess.Popen, str]:
    """seq2seq serve on a free loopback port; returns the process and its URL."""
    process = subprocess.Popen(
        [*SEQ2SEQ, "serve", "--port", "0", "--log-level", "warning", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = process.stdout.readline()
    if not first.startswith("serving "):
        process.kill()
        pytest.fail(f"the server did not start: {first}{process.stderr.read()}")
    return process, first.split(" on ")[-1].strip()


def stop_server(process: subprocess.Popen) -> int:
    process.terminate()
    try:
        return process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()


# --- Bounded work per request ------------------------------------------------------------------


def test_explain_refuses_maps_over_the_limit_before_decoding(client: TestClient) -> None:
    text = ("A man in a blue shirt is standing on a ladder and cleaning windows. " * 6)[:380]
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
    process, url = start_server("--model", MODEL, "--timeout", "120")
    try:
        request = {"text": text, "beam": 16, "nbest": 16, "all_maps": True}
        statuses: list[int] = []

        def explain() -> None:
            statuses.append(httpx.post(f"{url}/v1/explain", json=request, timeout=180).status_code)

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
def test_a_timed_out_request_stops_decoding(models: dict[str, ServedModel]) -> None:
    """A request that decodes past its limit is dropped by the worker at its next step: a short
    request sent after the 504 is answered within 2 s plus its own decoding time."""
    with TestClient(create_app(models, Limits(timeout_s=2.0))) as client:
        started = time.monotonic()
        client.post("/v1/translate", json={"lines": ["A dog runs."]})
        own_time = time.monotonic() - started
        heavy = {"lines": [HEAVY_LINE], "beam": 16, "max_len_ratio": 10.0}
        answer = client.post("/v1/translate", json=heavy)
        assert answer.status_code == 504
        started = time.monotonic()
        answer = client.post("/v1/translate", json={"lines": ["A dog runs."]})
        waited = time.monotonic() - started
    assert answer.status_code == 200
    assert waited < 2.0 + own_time


@pytest.mark.slow
def test_a_request_whose_client_left_stops_decoding(models: dict[str, ServedModel]) -> None:
    process, url = start_server("--model", MODEL, "--timeout", "60")
    try:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        body = json.dumps({"lines": [HEAVY_LINE], "beam": 16, "max_len_ratio": 10.0}).encode()
        with socket.create_connection((host, int(port))) as sock:
            head = f"POST /v1/translate HTTP/1.1\r\nHost: {host}\r\n"
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            sock.sendall(head.encode() + body)
            time.sleep(1.0)
        started = time.monotonic()
        answer = httpx.post(f"{url}/v1/translate", json={"lines": ["A dog runs."]}, timeout=60)
        waited = time.monotonic() - started
    finally:
        assert stop_server(process) == 0
    assert answer.status_code == 200
    assert waited < 5.0  # the heavy line alone decodes for over a minute


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
