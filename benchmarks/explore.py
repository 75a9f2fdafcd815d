#!/usr/bin/env python3
"""The attention explorer's speed and size, and its screenshot.

    benchmarks/explore.py                              # the shipped en-de model, 20 requests
    benchmarks/explore.py --screenshot docs/explore.png
    benchmarks/explore.py --tree-screenshot docs/explore-beam-tree.png  # and times it
    benchmarks/explore.py --chapter-screenshots docs   # docs/explore_<chapter>.png

Starts seq2seq serve on a free port of 127.0.0.1 with the shipped models and sends one
20-word sentence, one request at a time, to POST /v1/translate (the baseline: the translation
alone), then to POST /v1/explain (the translation, every map of the best hypothesis and the
word alignment), then to POST /v1/explain with the beam tree, as the page asks once its
"Beam search" section is open ("beam_tree": true: the search recorded step by step), after
`--warmup` untimed requests of each; prints the median and 90th percentile of the wall-clock
time of each, the server process's CPU time per request (with --threads 1, about the time the
request takes on an idle core), the CPU and its load. The payload is what the page loads for
the sentence: the page, its scripts and style sheet, GET /v1/models and the /v1/explain answer
(and how much the beam tree adds to it).

The training and compare pages: `--run RUN_FOLDER` serves a run's attention history (by
default one this script writes into a temporary folder: the shipped model's maps of four
sentences at 20 steps, the weights disturbed less at each later step, about 1 MB, the size of a real
run's); it times GET /v1/run/attention/{step}/{sentence} (one move of the slider) and the two
POST /v1/explain requests of the compare page (nbest 1, the shipped GRU and Transformer), and,
in Debian's chromium, a move of the step slider and a change of model on the compare page, from
the event to the map drawn.

Then one interaction of each chapter page (seq2seq.serving.chapters), timed alike: training the
kernel width, dragging the Nadaraya-Watson query, moving the valid length, the scoring and
multi-head widgets, and the self-attention of the 20-word sentence; with each chapter's page
weight (its HTML, scripts and style sheet, and the answers it loads when it opens).

Writes results/bench/explore/explore-<cpu>-<time>.json. --screenshot takes the picture of
docs/explore.md with Debian's chromium (driven by Playwright, as the browser tests do): the
page with the sentence typed in; --tree-screenshot the beam tree's section, a piece clicked,
after timing in the page how long drawing the tree and answering a click on a piece take;
--screenshot-training and --screenshot-compare the pictures of the two other pages;
--chapter-screenshots, the picture of each chapter page.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import NamedTuple

import torch
from measure import default_out, record_header, timed_call, write_record

from seq2seq.decoding.model_result import SHIPPED_MODELS

SEQ2SEQ = [sys.executable, "-m", "seq2seq"]
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


HISTORY_SENTENCES = (
    [
        "A man in a blue shirt is standing on a ladder .",
        "Two dogs are playing in the snow .",
        "A woman is selling fruit at a market .",
        "Children are playing football in a park .",
    ],
    [
        "Ein Mann in einem blauen Hemd steht auf einer Leiter .",
        "Zwei Hunde spielen im Schnee .",
        "Eine Frau verkauft Obst auf einem Markt .",
        "Kinder spielen Fußball in einem Park .",
    ],
)
HISTORY_STEPS = [1, *range(500, 10_000, 500)]  # 20 snapshots
# In the page: move the slider to `position`, or pick `model` on the compare page's left side,
# and wait until the map is drawn; the milliseconds between the two.
SLIDER_STEP_JS = """async ([position, step]) => {
  const start = performance.now();
  const slider = document.getElementById("step");
  slider.value = String(position);
  slider.dispatchEvent(new Event("input"));
  while (document.getElementById("training").dataset.step !== step
         || document.getElementById("status").textContent !== "") {
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  return performance.now() - start;
}"""
COMPARE_MODEL_JS = """async (model) => {
  const start = performance.now();
  const select = document.getElementById("left-model");
  select.value = model;
  select.dispatchEvent(new Event("change"));
  while (document.getElementById("left").dataset.model !== model
         || document.getElementById("status").textContent !== "") {
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  return performance.now() - start;
}"""


class Server(NamedTuple):
    url: str
    pid: int


@contextmanager
def serve(models: list[str], *options: str) -> Iterator[Server]:
    """seq2seq serve with `models` (names or folders) on a free port of 127.0.0.1, stopped
    on leaving."""
    command = [*SEQ2SEQ, "serve", "--port", "0", *options]
    for model in models:
        command += ["--model", model]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        line = process.stdout.readline()  # "serving a, b on http://127.0.0.1:PORT"
        if " on http://127.0.0.1:" not in line:
            raise RuntimeError(f"seq2seq serve did not start: {line!r}")
        yield Server(line.split(" on ")[-1].strip(), process.pid)
    finally:
        process.terminate()
        process.wait(timeout=30)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process `pid` so far (Linux: /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def post(url: str, body: dict) -> bytes:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return answer.read()


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as answer:
        return answer.read()


def timed(server: Server, requests: list[Callable[[], bytes]]) -> tuple[list[float], float]:
    """Wall-clock seconds of each request, and the server's CPU seconds per request (which a
    loaded machine inflates far less than the wall clock)."""
    cpu_before = cpu_seconds(server.pid)
    seconds = [timed_call(request)[1] for request in requests]
    return seconds, (cpu_seconds(server.pid) - cpu_before) / len(requests)


def posts(server: Server, path: str, body: dict, count: int) -> list[Callable[[], bytes]]:
    """`count` POSTs of `body` to `path`, for `timed`."""
    return [partial(post, server.url + path, body)] * count


def latency(server: Server, path: str, body: dict, requests: int, warmup: int) -> dict:
    """The `figures` of `requests` POSTs of `body` to `path`, after `warmup` untimed ones."""
    timed(server, posts(server, path, body, warmup))
    return figures(*timed(server, posts(server, path, body, requests)))


def figures(seconds: list[float], cpu: float) -> dict[str, float]:
    milliseconds = sorted(s * 1000 for s in seconds)
    return {
        "median_ms": round(statistics.median(milliseconds), 1),
        "p90_ms": round(milliseconds[int(0.9 * (len(milliseconds) - 1))], 1),
        "server_cpu_ms": round(cpu * 1000, 1),
    }


def measure(server: Server, model: str, beam: int, requests: int, warmup: int) -> dict:
    """The figures of one model and beam: latency of both endpoints, payload sizes."""
    translate = {"model": model, "lines": [SENTENCE], "beam": beam}
    explain = {"model": model, "text": SENTENCE, "beam": beam, "nbest": min(beam, 5)}
    tree = {**explain, "beam_tree": True}  # what the page asks with its beam tree open
    result = {
        "translate": latency(server, "/v1/translate", translate, requests, warmup),
        "explain": latency(server, "/v1/explain", explain, requests, warmup),
        "explain_beam_tree": latency(server, "/v1/explain", tree, requests, warmup),
    }
    files = (
        "/",
        "/explorer/common.js",
        "/explorer/beam_tree.js",
        "/explorer/explorer.js",
        "/explorer/explorer.css",
        "/v1/models",
    )
    result["explain_answer_bytes"] = len(post(server.url + "/v1/explain", explain))
    result["explain_beam_tree_answer_bytes"] = len(post(server.url + "/v1/explain", tree))
    result["page_bytes"] = sum(len(get(server.url + path)) for path in files)
    return result


def write_history(folder: Path) -> Path:
    """A run folder whose attention history holds the shipped en-de model's maps of
    HISTORY_SENTENCES at HISTORY_STEPS, the weights disturbed less at each later step (the
    sizes of a real run's history; the benchmark times reading and drawing them)."""
    from seq2seq.decoding.open_pytorch import load_model
    from seq2seq.training.attention_history import FILE_NAME, add_snapshot, choose_sentences

    shipped = load_model("transformer-tiny.multi30k.en-de")
    tokenizers = shipped.src_tokenizer, shipped.tgt_tokenizer
    sentences = choose_sentences(*tokenizers, HISTORY_SENTENCES, len(HISTORY_SENTENCES[0]))
    trained = {name: p.detach().clone() for name, p in shipped.model.named_parameters()}
    for number, step in enumerate(HISTORY_STEPS):
        torch.manual_seed(step)
        noise = 0.2 * (1 - number / (len(HISTORY_STEPS) - 1))
        with torch.no_grad():
            for name, parameter in shipped.model.named_parameters():
                parameter.copy_(trained[name] + noise * torch.randn_like(parameter))
        add_snapshot(folder / FILE_NAME, step, shipped.model, sentences, torch.device("cpu"))
    return folder


def measure_pages(server: Server, models: tuple[str, str], requests: int, warmup: int) -> dict:
    """The requests of the training page's slider and of the compare page (both models)."""
    index = json.loads(get(server.url + "/v1/run/attention"))
    steps = index["steps"]
    paths = [f"/v1/run/attention/{steps[i % len(steps)]}/0" for i in range(requests + warmup)]
    gets = [partial(get, server.url + path) for path in paths]
    timed(server, gets[:warmup])
    slider = figures(*timed(server, gets[warmup:]))
    seconds, cpu = [], 0.0
    for model in models:
        body = {"model": model, "text": SENTENCE, "nbest": 1}
        timed(server, posts(server, "/v1/explain", body, warmup))
        model_seconds, model_cpu = timed(server, posts(server, "/v1/explain", body, requests))
        seconds, cpu = seconds + model_seconds, cpu + model_cpu
    pairs = [a + b for a, b in zip(seconds[:requests], seconds[requests:], strict=True)]
    return {
        "history_steps": len(steps),
        "history_sentences": len(index["sentences"]),
        "slider_request": slider,
        "compare_requests": {**figures(pairs, cpu), "models": list(models)},
    }


def browser_timings(url: str, models: tuple[str, str], requests: int) -> dict:
    """In chromium: a move of the step slider, and a change of the compare page's left model,
    each from the event to its map drawn (after one untimed of each)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(url + "/explorer/training.html")
        page.wait_for_function(
            "() => document.getElementById('training').dataset.step !== undefined"
        )
        steps = json.loads(get(url + "/v1/run/attention"))["steps"]
        slider = [
            page.evaluate(SLIDER_STEP_JS, [i % len(steps), str(steps[i % len(steps)])])
            for i in range(requests + 1)
        ][1:]
        page.goto(url + "/explorer/compare.html")
        page.wait_for_function("() => document.getElementById('right').dataset.model !== undefined")
        picks = [page.evaluate(COMPARE_MODEL_JS, models[i % 2]) for i in range(requests + 1)][1:]
        browser.close()
    timings = {"slider_step": slider, "compare_model_change": picks}
    return {
        name: {
            k: v
            for k, v in figures([ms / 1000 for ms in ms_list], 0.0).items()
            if k != "server_cpu_ms"
        }
        for name, ms_list in timings.items()
    }


# One interaction of each chapter: (page, endpoint, request); the Nadaraya-Watson drag carries
# the data and learned width that the fit answers (added by `chapter_requests`).
CHAPTERS = [
    ("nadaraya_watson", "nadaraya_watson/fit", {"seed": 0}),
    ("nadaraya_watson", "nadaraya_watson", {"queries": [2.5]}),
    ("masked_softmax", "masked_softmax", {"scores": [[0.5] * 8] * 3, "valid_lens": [5, 5, 5]}),
    (
        "scoring",
        "scoring",
        {"queries": [[1.0, 0.5], [-0.5, 1.0], [0.8, -0.8]], "keys": [[1.0, 0.0]] * 5},
    ),
    ("multi_head", "multi_head", {"length": 6, "dim": 8, "heads": 2}),
    ("self_attention", "self_attention", {"text": SENTENCE}),
]


# The JavaScript that is true once a chapter page shows its first answer.
CHAPTER_SHOWN = (
    "() => Object.keys(document.getElementById('chapter').dataset).length > 0"
    " && document.getElementById('status').textContent === ''"
)


def chapter_requests(server: Server) -> list[tuple[str, str, dict]]:
    """CHAPTERS, the drag's request completed with the data and width of the fit."""
    fit = json.loads(post(server.url + "/v1/chapters/nadaraya_watson/fit", {"seed": 0}))
    data = {"keys": fit["x_train"], "values": fit["y_train"], "widths": [1.0, fit["w"]]}
    return [
        (page, endpoint, {**body, **data} if endpoint == "nadaraya_watson" else body)
        for page, endpoint, body in CHAPTERS
    ]


def measure_chapters(server: Server, requests: int, warmup: int) -> dict:
    """Each chapter interaction's latency and answer size, and each page's weight: its files
    and the answers it asks for when it opens (the drag's stands for the pooled curves')."""
    interactions: dict[str, dict] = {}
    for page, endpoint, body in chapter_requests(server):
        path = f"/v1/chapters/{endpoint}"
        answer = len(post(server.url + path, body))
        interactions[endpoint] = {**latency(server, path, body, requests, warmup), "page": page}
        interactions[endpoint]["answer_bytes"] = answer
    pages = {}
    for page in dict.fromkeys(page for page, _, _ in CHAPTERS):
        files = [f"{page}.html", f"{page}.js", "common.js", "explorer.css"]
        weight = sum(len(get(f"{server.url}/explorer/{name}")) for name in files)
        answers = [f["answer_bytes"] for f in interactions.values() if f["page"] == page]
        pages[page] = {"page_bytes": weight, "answers_bytes": sum(answers)}
    return {"interactions": interactions, "pages": pages}


def report(record: dict) -> None:
    print(f"{record['device']}; server threads: {record['server_threads']}")
    print(
        f"model {record['model']}, beam {record['beam']}, {record['words']} words, "
        f"{record['requests']} requests each; load average {record['load_average_before']}"
    )
    for endpoint, name in [
        ("translate", "/v1/translate"),
        ("explain", "/v1/explain"),
        ("explain_beam_tree", "/v1/explain with beam_tree"),
    ]:
        f = record[endpoint]
        print(
            f"POST {name:26}  median {f['median_ms']:.0f} ms, p90 {f['p90_ms']:.0f} ms, "
            f"server CPU {f['server_cpu_ms']:.0f} ms/request"
        )
    answer, page = record["explain_answer_bytes"] / 1000, record["page_bytes"] / 1000
    tree = record["explain_beam_tree_answer_bytes"] / 1000 - answer
    print(
        f"payload: /v1/explain answer {answer:.1f} kB + page {page:.1f} kB = "
        f"{answer + page:.1f} kB; the beam tree, once opened, {tree:.1f} kB more"
    )
    if "tree_draw_ms" in record:
        print(
            f"in the browser: the beam tree drawn in {record['tree_draw_ms']:.1f} ms, a click on "
            f"a piece answered in {record['tree_click_ms']:.1f} ms"
        )
    if "pages" in record:
        pages = record["pages"]
        print(
            f"training page: {pages['history_steps']} steps of {pages['history_sentences']} "
            f"sentences, {pages['history_bytes'] / 1e6:.2f} MB"
        )
        for name, f in pages.items():
            if isinstance(f, dict) and "median_ms" in f:
                cpu = f" server CPU {f['server_cpu_ms']:.0f} ms" if "server_cpu_ms" in f else ""
                print(f"{name:22} median {f['median_ms']:.0f} ms, p90 {f['p90_ms']:.0f} ms{cpu}")
    for name, f in record["chapters"]["interactions"].items():
        print(
            f"POST /v1/chapters/{name:20} median {f['median_ms']:.0f} ms, "
            f"p90 {f['p90_ms']:.0f} ms, server CPU {f['server_cpu_ms']:.0f} ms/request"
        )
    for name, f in record["chapters"]["pages"].items():
        page, answers = f["page_bytes"] / 1000, f["answers_bytes"] / 1000
        print(f"{name + '.html':20} page {page:.1f} kB + answers {answers:.1f} kB")


# In the page: milliseconds to draw the beam tree of the answer shown, and to answer a click on
# a piece (the attention row shown), each the median of 11 times; the browser's own clock.
TREE_TIMINGS = """() => {
  const median = (times) => times.sort((a, b) => a - b)[5];
  const draw = [], click = [];
  for (let i = 0; i < 11; i++) {
    let start = performance.now();
    drawBeamTree(state.payload);
    draw.push(performance.now() - start);
    const nodes = document.querySelectorAll("#beam-tree g.tree-node:not(.root)");
    start = performance.now();
    nodes[(i * 37) % nodes.length].dispatchEvent(new MouseEvent("click", { bubbles: true }));
    click.push(performance.now() - start);
  }
  return { tree_draw_ms: median(draw), tree_click_ms: median(click) };
}"""


def screenshot(url: str, path: Path | None, tree_path: Path | None) -> dict:
    """The whole page at `path`, the beam tree's section (a piece of step 4 clicked) at
    `tree_path`, each where given; returns the page's TREE_TIMINGS with `tree_path`."""
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
        if path:
            page.screenshot(path=str(path), full_page=True)
        timings = {}
        if tree_path:
            page.click("#beam-tree-section summary")  # the page asks for the tree once opened
            page.wait_for_selector("#beam-tree g.tree-node.best")
            timings = {k: round(v, 1) for k, v in page.evaluate(TREE_TIMINGS).items()}
            page.locator("#beam-tree g.tree-node[data-step='3'][data-fate='kept']").first.click()
            page.locator("#beam-tree-section").screenshot(path=str(tree_path))
        browser.close()
    # 256 colours are plenty for a page of text and heatmaps: a quarter of the bytes.
    for saved in (path, tree_path):
        if saved:
            Image.open(saved).convert("RGB").quantize(256).save(saved, optimize=True)
            print(f"screenshot: {saved}")
    return timings


def page_screenshot(url: str, path: Path, ready: str) -> None:
    """The picture of the page at `url` once the JavaScript `ready` is true."""
    from PIL import Image
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(url)
        page.wait_for_function(ready)
        page.screenshot(path=str(path), full_page=True)
        browser.close()
    Image.open(path).convert("RGB").quantize(256).save(path, optimize=True)
    print(f"screenshot: {path}")


def take_screenshots(url: str, args: argparse.Namespace) -> dict:
    """The pictures the options ask for; returns the beam tree's timings (see `screenshot`)."""
    timings = {}
    if args.screenshot or args.tree_screenshot:
        timings = screenshot(url, args.screenshot, args.tree_screenshot)
    if args.screenshot_training:
        ready = "() => document.getElementById('training').dataset.step !== undefined"
        page_screenshot(url + "/explorer/training.html", args.screenshot_training, ready)
    if args.screenshot_compare:
        ready = "() => ['left', 'right'].every(s => document.getElementById(s).dataset.model)"
        page_screenshot(url + "/explorer/compare.html", args.screenshot_compare, ready)
    if args.chapter_screenshots:
        for name in dict.fromkeys(name for name, _, _ in CHAPTERS):
            path = args.chapter_screenshots / f"explore_{name}.png"
            page_screenshot(f"{url}/explorer/{name}.html", path, CHAPTER_SHOWN)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="transformer-tiny.multi30k.en-de")
    parser.add_argument("--beam", type=int, default=4, help="as the page asks by default")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, help="seq2seq serve --threads (default: its own)")
    parser.add_argument("--screenshot", type=Path, help="save the page's picture here (PNG)")
    parser.add_argument("--tree-screenshot", type=Path, help="and the beam tree's (PNG)")
    parser.add_argument(
        "--pages", action="store_true", help="also time the training and compare pages"
    )
    parser.add_argument("--run", type=Path, help="the run folder of the training page")
    parser.add_argument(
        "--screenshot-training", type=Path, help="the training page's picture (needs --run)"
    )
    parser.add_argument("--screenshot-compare", type=Path, help="the compare page's picture")
    parser.add_argument(
        "--chapter-screenshots", type=Path, help="save each chapter's picture in this folder"
    )
    args = parser.parse_args()
    if args.screenshot_training and not args.run:
        parser.error("--screenshot-training needs --run: the picture is of a real run's history")

    shipped = sorted(p.parent.name for p in SHIPPED_MODELS.glob("*/model.safetensors"))
    models = [args.model, *(name for name in shipped if name != args.model)]
    options = ["--threads", str(args.threads)] if args.threads else []
    record = {
        **record_header("explore"),
        "command": " ".join(["benchmarks/explore.py", *sys.argv[1:]]),
        "server_threads": args.threads or torch.get_num_threads(),
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
        "model": args.model,
        "beam": args.beam,
        "words": len(SENTENCE.split()),
        "requests": args.requests,
    }
    del record["threads"]  # the benchmark's own process does no work: the server's count
    with tempfile.TemporaryDirectory() as temporary:
        run = args.run or write_history(Path(temporary) / "run")
        with serve(models, *options, "--run", str(run)) as server:
            record.update(measure(server, args.model, args.beam, args.requests, args.warmup))
            record["chapters"] = measure_chapters(server, args.requests, args.warmup)
            if args.pages:
                compared = ("gru-small.multi30k.en-de", args.model)
                pages = measure_pages(server, compared, args.requests, args.warmup)
                pages |= browser_timings(server.url, compared, args.requests)
                pages["history_bytes"] = (run / "attention_history.safetensors").stat().st_size
                record["pages"] = pages
            record.update(take_screenshots(server.url, args))
    record["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    report(record)
    out = Path("results/bench/explore") / default_out("explore").name  # beside, as scale's
    write_record(record, out)
    print(f"record: {out}")


if __name__ == "__main__":
    main()
