#!/usr/bin/env python3
"""The attention explorer's speed and size, and its screenshot.

    benchmarks/explore.py                              # the shipped en-de model, 20 requests
    benchmarks/explore.py --screenshot docs/explore.png

Starts scripts/serve.py on a free port of 127.0.0.1 with the shipped models and sends one 20-word
sentence, one request at a time, to POST /v1/translate (the baseline: the translation alone)
and to POST /v1/explain (the translation, every map of the best hypothesis and the word
alignment), alternating, after `--warmup` untimed requests of each; prints the median and 90th
percentile of each, with the CPU and its load. The payload is what the page loads for the
sentence: the page, its script and style sheet, GET /v1/models and the /v1/explain answer.

--screenshot takes the picture of docs/explore.md with Debian's chromium (driven by
Playwright, as the browser tests do): the page with the sentence typed in.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SENTENCE = (
    "A man in a blue shirt is standing on a ladder and cleaning the windows of a tall "
    "building ."
)  # 20 words


@contextmanager
def serve(models: list[str], *options: str) -> Iterator[str]:
    """scripts/serve.py with `models` (names or folders) on a free port of 127.0.0.1; yields
    its URL and stops it on leaving."""
    command = [sys.executable, str(ROOT / "scripts" / "serve.py"), "--port", "0", *options]
    for model in models:
        command += ["--model", model]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        line = process.stdout.readline()  # "serving a, b on http://127.0.0.1:PORT"
        if " on http://127.0.0.1:" not in line:
            raise RuntimeError(f"scripts/serve.py did not start: {line!r}")
        yield line.split(" on ")[-1].strip()
    finally:
        process.terminate()
        process.wait(timeout=30)


def post(url: str, body: dict) -> bytes:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return answer.read()


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as answer:
        return answer.read()


def timed(url: str, body: dict) -> float:
    start = time.perf_counter()
    post(url, body)
    return time.perf_counter() - start


def summary(seconds: list[float]) -> str:
    milliseconds = sorted(s * 1000 for s in seconds)
    p90 = milliseconds[int(0.9 * (len(milliseconds) - 1))]
    return f"median {statistics.median(milliseconds):.0f} ms, p90 {p90:.0f} ms"


def measure(url: str, model: str, beam: int, requests: int, warmup: int) -> None:
    translate = {"model": model, "lines": [SENTENCE], "beam": beam}
    explain = {"model": model, "text": SENTENCE, "beam": beam, "nbest": min(beam, 5)}
    for _ in range(warmup):
        timed(url + "/v1/translate", translate)
        timed(url + "/v1/explain", explain)
    times: dict[str, list[float]] = {"translate": [], "explain": []}
    for _ in range(requests):
        times["translate"].append(timed(url + "/v1/translate", translate))
        times["explain"].append(timed(url + "/v1/explain", explain))
    answer = post(url + "/v1/explain", explain)
    page = sum(
        len(get(url + path))
        for path in ("/", "/explorer/explorer.js", "/explorer/explorer.css", "/v1/models")
    )
    print(f"model {model}, beam {beam}, {len(SENTENCE.split())} words, {requests} requests each")
    print(f"POST /v1/translate  {summary(times['translate'])}   (baseline)")
    print(f"POST /v1/explain    {summary(times['explain'])}")
    print(
        f"payload: /v1/explain answer {len(answer) / 1000:.1f} kB + page {page / 1000:.1f} kB "
        f"= {(len(answer) + page) / 1000:.1f} kB"
    )


def screenshot(url: str, path: Path) -> None:
    from PIL import Image
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(url + "/")
        page.wait_for_selector("#model option", state="attached")
        page.fill("#text", SENTENCE)
        page.wait_for_function(
            "text => document.getElementById('result').dataset.text === text", arg=SENTENCE
        )
        page.select_option("#layer", "3")
        page.screenshot(path=str(path), full_page=True)
        browser.close()
    # 256 colours are plenty for a page of text and heatmaps: a quarter of the bytes.
    Image.open(path).convert("RGB").quantize(256).save(path, optimize=True)
    print(f"screenshot: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="transformer-tiny.multi30k.en-de")
    parser.add_argument("--beam", type=int, default=4, help="as the page asks by default")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--screenshot", type=Path, help="save the page's picture here (PNG)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))
    from common import cpu_description

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"CPU: {cpu_description()}; load average before: {load}")
    shipped = sorted(p.parent.name for p in (ROOT / "models").glob("*/model.safetensors"))
    with serve([args.model, *(name for name in shipped if name != args.model)]) as url:
        measure(url, args.model, args.beam, args.requests, args.warmup)
        if args.screenshot:
            screenshot(url, args.screenshot)
    print(f"load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
