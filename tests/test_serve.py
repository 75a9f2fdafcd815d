"""The HTTP server (seq2seq/serving, seq2seq serve) with the shipped en-de model: in-process
through FastAPI's test client, and as a real server process on a free loopback port."""

import gzip
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import torch
from commands import run_in_process, start_server, stop_server
from fastapi import FastAPI
from fastapi.testclient import TestClient
from html_check import well_formed
from libretranslatepy import LibreTranslateAPI

from seq2seq.commands.serve import is_loopback
from seq2seq.data.entities import NUMBER
from seq2seq.decoding.model_folder import CARD
from seq2seq.decoding.model_result import SHIPPED_MODELS
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.serving.app import create_app
from seq2seq.serving.limits import Limits
from seq2seq.serving.registry import ServedModel, served_model

ROOT = Path(__file__).resolve().parents[1]
MODEL = "transformer-tiny.multi30k.en-de"
MODEL_DIR = SHIPPED_MODELS / MODEL
LIMITS = Limits(max_lines=40, max_line_chars=200, max_body_bytes=20_000, max_beam=8)
TEST_LINES = 40  # Multi30k test sentences compared with translate.py


def load_served(precision: str) -> dict[str, ServedModel]:
    inference = load_model(MODEL_DIR)
    inference.config.decode.precision = precision
    return {MODEL: served_model(MODEL, inference, torch.device("cpu"))}


@pytest.fixture(scope="module")
def models() -> dict[str, ServedModel]:
    """The shipped en-de model as the server loads it on a CPU: int8."""
    return load_served("int8")


@pytest.fixture(scope="module")
def client(models: dict[str, ServedModel]) -> Iterator[TestClient]:
    with TestClient(create_app(models, LIMITS)) as client:
        yield client


@pytest.fixture(scope="module")
def test_set(shared_data: Path) -> list[str]:
    path = shared_data / "multi30k" / "test_2016_flickr.en.gz"
    with gzip.open(path, "rt", encoding="utf-8") as file:
        return [line.rstrip("\n") for _, line in zip(range(TEST_LINES), file, strict=False)]


# --- The API in-process ------------------------------------------------------------------------


@pytest.mark.slow  # decodes the test set twice, at beam 5
def test_api_output_equals_translate_py_batch_mode(
    client: TestClient, test_set: list[str], tmp_path: Path
) -> None:
    source = tmp_path / "test.en"
    source.write_text("\n".join(test_set) + "\n", encoding="utf-8")
    common = ["--model", MODEL, "--precision", "int8", "--beam", "5", "--input", str(source)]
    best = run_in_process(["translate", *common])
    assert best.returncode == 0, best.stderr
    nbest = run_in_process(["translate", *common, "--nbest", "3"])
    assert nbest.returncode == 0, nbest.stderr

    answer = client.post("/v1/translate", json={"lines": test_set, "beam": 5, "nbest": 3})
    assert answer.status_code == 200
    translations = answer.json()["translations"]
    assert [line[0]["text"] for line in translations] == best.stdout.splitlines()
    assert [
        f"{number} ||| {t['text']} ||| {t['score']:.4f}"
        for number, line in enumerate(translations)
        for t in line
    ] == nbest.stdout.splitlines()


def test_models_describes_the_model_and_its_card(client: TestClient) -> None:
    card = json.loads((MODEL_DIR / CARD).read_text(encoding="utf-8"))
    [info] = client.get("/v1/models").json()
    assert (info["name"], info["source"], info["target"]) == (MODEL, "en", "de")
    assert (info["family"], info["parameters"]) == ("transformer-tiny", card["parameters"])
    assert (
        info["domain"]
        == card["domain"]
        == ("Flickr image captions (Multi30k: 29,000 training pairs describing photos)")
    )
    assert (info["precision"], info["beam"], info["keep_numbers"]) == ("int8", 5, False)
    assert info["scores"]["bleu"] == card["bleu"]
    assert info["scores"]["signatures"] == card["signatures"]


def test_health_schema_and_metrics(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "models": [MODEL], "queue_lines": 0}
    schema = client.get("/openapi.json").json()
    assert {"/v1/translate", "/v1/models", "/translate", "/languages"} <= set(schema["paths"])
    client.post("/v1/translate", json={"lines": ["A dog runs."]})
    metrics = client.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    assert 'seq2seq_http_requests_total{path="/v1/translate",status="200"}' in metrics.text


def test_empty_lines_and_options_follow_the_request(client: TestClient) -> None:
    lines = ["", "A dog runs in the snow.", "   "]
    answer = client.post("/v1/translate", json={"lines": lines, "beam": 1}).json()
    assert [len(nbest) for nbest in answer["translations"]] == [1, 1, 1]
    assert answer["translations"][0] == [{"text": "", "score": 0.0}]
    assert answer["translations"][2] == [{"text": "", "score": 0.0}]
    assert answer["translations"][1][0]["text"] != ""
    short = client.post(
        "/v1/translate", json={"lines": lines[1:2], "beam": 1, "max_len_ratio": 0.1}
    ).json()
    # max length: 0.1 * source tokens + 10 (the model's max_len_const), so at most 10 tokens
    assert len(short["translations"][0][0]["text"].split()) <= 10


def test_the_number_guard_follows_the_request(client: TestClient) -> None:
    """keep_numbers: true lets a number into the output only as one of the source's; left out,
    the model's default (off for this model, which garbles them)."""
    line = "A man pays 19.99 euros for 48213 roses."

    def best(**options: object) -> str:
        answer = client.post("/v1/translate", json={"lines": [line], **options})
        return answer.json()["translations"][0][0]["text"]

    assert "1999" in best() and best(keep_numbers=False) == best()
    assert set(NUMBER.findall(best(keep_numbers=True))) <= {"19.99", "19,99", "48213"}


BAD_REQUESTS = [
    (b'{"lines": ["a"', 400, "malformed JSON: Expecting ',' delimiter at character 14"),
    (b'{"lines": ["\xff"]}', 400, "the request body is not UTF-8 text (bad byte at byte 13)"),
    (b'{"lines": []}', 422, "lines: List should have at least 1 item after validation, not 0"),
    (b'{"lines": ["a"], "beam": 0}', 422, "beam: Input should be greater than or equal to 1"),
    (b'{"lines": ["a"], "beam": 9}', 422, "beam: 9 is over this server's limit of 8"),
    (b'{"lines": ["a"], "beam": 2, "nbest": 3}', 422, "nbest: 3 is more than the beam size (2)"),
    (b'{"lines": ["a"], "nbest": 6}', 422, "nbest: 6 is more than the beam size (5)"),
    (
        b'{"lines": ["a"], "length_penalty": NaN}',
        422,
        "length_penalty: Input should be a finite number",
    ),
    (b'{"lines": ["a"], "beam": "5"}', 422, "beam: Input should be a valid integer"),
    (b'{"lines": ["a"], "keep_numbers": 1}', 422, "keep_numbers: Input should be a valid boolean"),
    (b'{"lines": ["a", 3]}', 422, "lines[1]: Input should be a valid string"),
    (b'{"lines": ["a"], "file": "/etc/passwd"}', 422, "file: Extra inputs are not permitted"),
    (b'["a"]', 422, "body: a JSON object is needed"),
    (
        b'{"lines": ["a"], "model": "../x"}',
        404,
        f"model: no model named '../x'; this server has {MODEL}",
    ),
    (
        json.dumps({"lines": ["a"] * 41}).encode(),
        413,
        "lines: 41 lines, over the limit of 40 per request",
    ),
    (
        json.dumps({"lines": ["a", "b" * 201]}).encode(),
        413,
        "lines[1]: 201 characters, over the limit of 200 per line",
    ),
    (json.dumps({"lines": ["a " * 10_000]}).encode(), 413, "the request body is over 20000 bytes"),
]


@pytest.mark.parametrize(("body", "status", "error"), BAD_REQUESTS)
def test_bad_requests_get_a_status_and_one_line(
    client: TestClient, body: bytes, status: int, error: str
) -> None:
    answer = client.post(
        "/v1/translate", content=body, headers={"content-type": "application/json"}
    )
    assert (answer.status_code, answer.json()) == (status, {"error": error})


def test_framework_errors_are_one_line_json(client: TestClient) -> None:
    answer = client.get("/v2/translate")
    assert (answer.status_code, answer.json()) == (
        404,
        {"error": "/v2/translate: no such endpoint"},
    )
    answer = client.get("/v1/translate")
    assert answer.status_code == 405
    assert answer.json() == {"error": "GET /v1/translate: method not allowed"}
    answer = client.post("/v1/translate", data={"lines": "a"})  # a form, not JSON
    assert answer.json() == {
        "error": "Content-Type application/x-www-form-urlencoded: send application/json"
    }
    assert answer.status_code == 415


def test_a_full_queue_answers_503_and_a_late_answer_504(models: dict[str, ServedModel]) -> None:
    # Without `with`, the app's lifespan does not run: its worker never starts, so the first
    # request waits in the queue until its time is up and keeps the queue full.
    app = create_app(models, Limits(max_queue_lines=2, timeout_s=0.2))
    client = TestClient(app)
    late = client.post("/v1/translate", json={"lines": ["A dog.", "A cat."]})
    assert late.status_code == 504
    assert late.json() == {"error": "no answer within the server's limit of 0.2 s"}
    busy = client.post("/v1/translate", json={"lines": ["A bird."]})
    assert (busy.status_code, busy.headers["retry-after"]) == (503, "1")
    assert busy.json() == {"error": "the server is busy; retry in 1 s"}


def test_another_router_reaches_the_models_and_the_worker(models: dict[str, ServedModel]) -> None:
    from fastapi import APIRouter

    from seq2seq.serving.state import StateDep

    router = APIRouter()

    @router.post("/v1/upper")
    async def upper(state: StateDep) -> dict[str, str]:
        served = state.model(None)
        [[best]] = await state.translate(served, ["A dog."], state.options(served, beam=1))
        return {"text": best.text.upper()}

    app: FastAPI = create_app(models, LIMITS)
    app.include_router(router)
    with TestClient(app) as client:
        expected = client.post("/v1/translate", json={"lines": ["A dog."], "beam": 1}).json()
        upper_text = client.post("/v1/upper").json()["text"]
    assert upper_text == expected["translations"][0][0]["text"].upper()


def test_libretranslate_api(client: TestClient) -> None:
    assert client.get("/languages").json() == [{"code": "en", "name": "English", "targets": ["de"]}]
    ours = client.post("/v1/translate", json={"lines": ["A dog runs.", "Two men sit."]}).json()
    texts = [nbest[0]["text"] for nbest in ours["translations"]]
    answer = client.post(
        "/translate", json={"q": "A dog runs.\nTwo men sit.", "source": "en", "target": "de"}
    )
    assert answer.json() == {"translatedText": "\n".join(texts)}
    both = {"q": ["A dog runs.", "Two men sit."], "source": "auto", "target": "de"}
    answer = client.post("/translate", json={**both, "alternatives": 1})
    body = answer.json()
    assert body["translatedText"] == texts
    assert [len(alternatives) for alternatives in body["alternatives"]] == [1, 1]
    assert body["detectedLanguage"] == {"confidence": 100.0, "language": "en"}
    answer = client.post("/translate", data={"q": "A dog runs.", "source": "en", "target": "fr"})
    assert answer.status_code == 400
    assert answer.json() == {
        "error": "source en, target fr: no model for this pair; see /languages"
    }


def test_libretranslate_and_v1_translate_keep_html_tags(client: TestClient) -> None:
    html = (
        '<p>A <b>dog</b> runs in the <a href="/snow?x=1&amp;y=2">white <i>snow</i></a>. '
        "Two <em>men</em> sit. <u>The <b>sun</b></u> shines.</p>"
    )
    text = "A dog runs in the white snow. Two men sit. The sun shines."
    plain = client.post("/v1/translate", json={"lines": [text]})
    words = plain.json()["translations"][0][0]["text"].split()
    libre = {"q": html, "source": "en", "target": "de", "format": "html"}
    libre_answer = client.post("/translate", json=libre)
    ours = client.post("/v1/translate", json={"lines": [html], "format": "html"})
    (best,) = ours.json()["translations"][0]
    assert libre_answer.json() == {"translatedText": best["text"]}
    tags, text = well_formed(best["text"])
    assert tags == well_formed(html)[0] and text.split() == words
    assert best["score"] == pytest.approx(plain.json()["translations"][0][0]["score"])
    bad = [
        client.post("/translate", json={"q": "a", "source": "en", "target": "de", "format": "xml"}),
        client.post(
            "/translate",
            json={"q": "a", "source": "en", "target": "de", "format": "html", "alternatives": 1},
        ),
        client.post("/v1/translate", json={"lines": ["a"], "format": "xml"}),
        client.post("/v1/translate", json={"lines": ["a"], "format": "html", "nbest": 2}),
    ]
    assert [answer.status_code for answer in bad] == [422, 400, 422, 422]
    assert bad[1].json() == {"error": "alternatives: format html gives the best translation alone"}
    assert bad[3].json() == {"error": "nbest: format html gives the best translation alone"}
    assert all(list(answer.json()) == ["error"] for answer in bad)


def test_only_loopback_addresses_count_as_local() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")


# --- A real server process ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A server process in fp32, whose answers do not depend on the other lines of a batch (in
    int8, each batch's activations get their own int8 scale)."""
    process, url = start_server(
        "--model", MODEL, "--precision", "fp32", "--batch-wait-ms", "20", "--log-level", "warning"
    )
    yield url
    assert stop_server(process) == 0


def post_lines(url: str, lines: list[str]) -> list[str]:
    answer = httpx2.post(f"{url}/v1/translate", json={"lines": lines}, timeout=60)
    assert answer.status_code == 200, answer.text
    return [nbest[0]["text"] for nbest in answer.json()["translations"]]


def metric(url: str, name: str) -> float:
    for line in httpx2.get(f"{url}/metrics").text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no metric {name}")


def batches_over(url: str, sentences: int) -> float:
    """How many decoding batches had more than `sentences` sentences (one of SIZE_BUCKETS)."""
    bucket = metric(url, f'seq2seq_batch_sentences_bucket{{le="{float(sentences)}"}}')
    return metric(url, "seq2seq_batch_sentences_count") - bucket


@pytest.mark.slow  # serves in another process
def test_concurrent_requests_are_batched_and_answered_in_order(
    server: str, test_set: list[str]
) -> None:
    requests = [test_set[i : i + 1 + i % 3] for i in range(0, 32, 2)]  # 1 to 3 lines each
    expected = [post_lines(server, lines) for lines in requests]  # one request at a time
    batches_before = metric(server, "seq2seq_batch_requests_count")
    alone_before = metric(server, 'seq2seq_batch_requests_bucket{le="1.0"}')
    answers: list[list[str] | None] = [None] * len(requests)

    def send(i: int) -> None:
        answers[i] = post_lines(server, requests[i])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == expected
    batches = metric(server, "seq2seq_batch_requests_count") - batches_before
    alone = metric(server, 'seq2seq_batch_requests_bucket{le="1.0"}') - alone_before
    assert alone < batches < len(requests)  # some batches merged several requests


@pytest.mark.slow  # serves in another process
def test_health_answers_while_the_model_decodes(server: str, test_set: list[str]) -> None:
    done = threading.Event()

    def translate_many() -> None:
        post_lines(server, test_set)
        done.set()

    thread = threading.Thread(target=translate_many)
    before = metric(server, "seq2seq_batch_sentences_count")
    thread.start()
    while metric(server, "seq2seq_batch_sentences_count") == before:  # not taken up yet
        time.sleep(0.005)
    health = httpx2.get(f"{server}/healthz")
    answered_while_busy = not done.is_set()
    thread.join()
    assert health.status_code == 200 and answered_while_busy


@pytest.mark.slow  # serves in another process
def test_libretranslate_client_works_unchanged(server: str) -> None:
    client = LibreTranslateAPI(server)
    assert client.languages() == [{"code": "en", "name": "English", "targets": ["de"]}]
    assert (
        client.translate("A dog runs in the snow.", "en", "de")
        == post_lines(server, ["A dog runs in the snow."])[0]
    )


@pytest.mark.slow  # serves in another process
def test_sigterm_answers_the_requests_in_flight_and_exits_0(test_set: list[str]) -> None:
    process, url = start_server("--model", MODEL, "--precision", "fp32", "--log-level", "error")
    try:
        expected = post_lines(url, test_set[:1])[0]
        outcomes: list[str] = []
        big: list[list[str]] = []
        stop = threading.Event()

        def load() -> None:  # single sentences until the server is gone
            while not stop.is_set():
                try:
                    answer = httpx2.post(f"{url}/v1/translate", json={"lines": test_set[:1]})
                except httpx2.ConnectError:
                    outcomes.append("refused")
                    return
                except (httpx2.ReadError, httpx2.WriteError, httpx2.RemoteProtocolError):
                    # uvicorn's shutdown closes a connection whose request it has not begun to
                    # read (a client that connected as the server stopped accepting): never a
                    # request in flight, which the 40-line one below is
                    outcomes.append("closed before its request began")
                    return
                ok = answer.status_code == 200
                right = ok and answer.json()["translations"][0][0]["text"] == expected
                outcomes.append("right" if right else f"{answer.status_code} {answer.text}")

        clients = [threading.Thread(target=load) for _ in range(4)]
        clients.append(threading.Thread(target=lambda: big.append(post_lines(url, test_set))))
        before = metric(url, "seq2seq_batch_sentences_count")
        for thread in clients:
            thread.start()
        # the signal comes once the 40-line request is in a batch (the single lines make
        # batches of 4 at most) and 3 batches were made, whatever the machine's load
        while batches_over(url, 4) < 1 or metric(url, "seq2seq_batch_sentences_count") < before + 3:
            time.sleep(0.005)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        stop.set()
        for thread in clients:
            thread.join(timeout=60)
    finally:
        stop_server(process)
    assert len(big) == 1 and len(big[0]) == len(test_set)  # the 40-line request in flight
    assert outcomes.count("right") >= 3
    assert set(outcomes) <= {"right", "refused", "closed before its request began"}, outcomes


def test_refuses_to_start_on_a_port_in_use_or_a_bad_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)  # serve sets it: restored after
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_in_process(["serve", "--model", MODEL, "--port", str(port)])
    assert result.returncode == 2
    assert result.stderr == (
        f"error: --host 127.0.0.1 --port {port}: cannot listen there (Address already in use)\n"
    )
    missing = tmp_path / "missing"
    result = run_in_process(["serve", "--model", str(missing), "--port", "0"])
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: --model {missing}: not an exported model folder")
    assert len(result.stderr.splitlines()) == 1


# --- The load benchmark (benchmarks/serve_load.py) ---------------------------------------------


def test_load_benchmark_counts_batches_and_marks_the_targets() -> None:
    import serve_load

    before = {"1.0": 2, "2.0": 2, "4.0": 3, "+Inf": 3, "count": 3, "sum": 5}
    after = {"1.0": 2, "2.0": 4, "4.0": 6, "+Inf": 6, "count": 6, "sum": 12}
    assert serve_load.batches_between(before, after) == {
        "batches": 3,
        "mean_sentences": 7 / 3,
        "sentences_per_batch": {"<=1.0": 0, "<=2.0": 2, "<=4.0": 1, "<=+Inf": 0},
    }
    assert serve_load.percentile([4.0, 1.0, 3.0, 2.0, 5.0], 50) == 3.0

    def level(clients: int, speed: float, p99: float, statuses: dict[str, int]) -> dict:
        health = {"failed": 0}
        latency = {"p99": p99}
        return {"sentences_per_s": speed, "latency_s": latency, "statuses": statuses,
                "health": health, "server_peak_rss_mib": 400.0, "clients": clients}  # fmt: skip

    levels = {
        1: level(1, 10.0, 0.2, {"200": 10}),
        32: level(32, 60.0, 0.8, {"200": 60}),
        128: level(128, 65.0, 3.0, {"200": 60, "503": 5, "ReadTimeout": 1}),
    }
    marked = serve_load.targets(levels, {"sentences_per_s": 100.0}, idle=300.0)
    assert {name: target["met"] for name, target in marked.items()} == {
        "32 clients >= 4x one client": True,
        "32 clients >= 70% of batch mode": False,
        "32 clients p99 < 1 s": True,
        "128 clients: only 200 and 503, health always answered": False,
        "128 clients: RSS <= 1.5x idle": True,
    }


@pytest.mark.slow  # starts Pythons that import torch
def test_load_benchmark_runs_a_real_server(tmp_path: Path, shared_data: Path) -> None:
    out = tmp_path / "serve.json"
    script = ROOT / "benchmarks" / "serve_load.py"
    command = [sys.executable, str(script), "--clients", "1", "4", "--seconds", "1"]
    subprocess.run([*command, "--sentences", "12", "--out", str(out)], check=True)
    record = json.loads(out.read_text(encoding="utf-8"))
    assert list(record["engines"]) == ["pytorch", "ctranslate2"]
    for run in record["engines"].values():
        assert [level["clients"] for level in run["levels"]] == [1, 4]
        for level in run["levels"]:
            assert set(level["statuses"]) == {"200"}
            assert level["health"]["failed"] == 0
            assert level["decoding"]["batches"] >= 1
        assert run["batch_mode"]["sentences"] == 12
    assert record["engines"]["ctranslate2"]["direct_peak_rss_mib"] > 0
    assert record["environment"]["device_name"]
    assert out.with_suffix(".png").is_file()


def test_a_line_of_more_pieces_than_the_model_decodes_is_413(
    models: dict[str, ServedModel],
) -> None:
    """Checked before queueing, so a long line never fails the other requests of its batch."""
    served = models[MODEL]
    cfg = served.translator.decode_cfg
    long_line = "A dog runs in the snow with a red ball."
    pieces = len(served.translator.src_tokenizer.encode([long_line])[0])
    saved, cfg.max_src_pieces = cfg.max_src_pieces, 4
    try:
        with TestClient(create_app(models, Limits())) as client:
            answer = client.post("/v1/translate", json={"lines": ["A dog.", long_line]})
            short = client.post("/v1/translate", json={"lines": ["A dog."]})
    finally:
        cfg.max_src_pieces = saved
    assert (answer.status_code, answer.json()) == (
        413,
        {"error": f"lines[1]: {pieces} pieces, over the limit of 4 pieces per sentence at beam 5"},
    )
    assert short.status_code == 200


def test_sentences_are_translated_apart_unless_the_request_says_not(
    client: TestClient, models: dict[str, ServedModel]
) -> None:
    sentences = ["A dog runs in the snow.", "Two men sit on a bench.", "A woman sings."]
    paragraph = f"{sentences[0]}  {sentences[1]}\n{sentences[2]}"

    def texts(body: dict) -> list[str]:
        answer = client.post("/v1/translate", json={"beam": 1, **body})
        assert answer.status_code == 200, answer.text
        return [nbest[0]["text"] for nbest in answer.json()["translations"]]

    alone = texts({"lines": sentences})
    assert texts({"lines": [paragraph]}) == [f"{alone[0]}  {alone[1]}\n{alone[2]}"]
    whole = models[MODEL].translator.translate([paragraph], 1, split_sentences=False)
    assert texts({"lines": [paragraph], "split_sentences": False}) == [whole[0][0].text]
    bad = client.post("/v1/translate", json={"lines": [paragraph], "split_sentences": "no"})
    assert bad.status_code == 422 and "split_sentences" in bad.json()["error"]
    assert "\n" not in bad.json()["error"]
    libre = {"q": paragraph, "source": "en", "target": "de"}
    answer = client.post("/translate", json=libre).json()
    assert answer == {"translatedText": f"{alone[0]}  {alone[1]}\n{alone[2]}"}
    first_line = models[MODEL].translator.translate(
        [paragraph.split("\n")[0]], split_sentences=False
    )
    answer = client.post("/translate", data={**libre, "split_sentences": "false"}).json()
    assert answer == {"translatedText": f"{first_line[0][0].text}\n{alone[2]}"}
