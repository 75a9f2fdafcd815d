#!/usr/bin/env python3
"""Load benchmark of the HTTP server (seq2seq serve), beside translate.py's batch mode.

    benchmarks/serve_load.py                               # 1, 8, 32, 128 clients, 20 s each
    benchmarks/serve_load.py --clients 1 32 --seconds 5    # a quick look
    benchmarks/serve_load.py --engine ctranslate2 --precision fp32   # the CTranslate2 engine

Starts a real server process on a free loopback port with the shipped en-de model (int8, beam 5
by default), then for each number of clients runs that many concurrent clients for a fixed
time, each sending one Multi30k test sentence per request and the next as soon as it has its
answer. Measured per level: answered sentences/s, p50/p95/p99 latency of the answered
requests, the answers by HTTP status (200, and 503 past the queue's bound), the decoding batch
sizes the server's /metrics saw, the server's resident memory (sampled every 50 ms; its idle
value is taken after a warm-up request), and the slowest of the health checks sent every
100 ms meanwhile. Then, in this process, the same model decodes the whole test set as
translate.py's batch mode does (`Translator.translate`, model loading excluded).

Writes results/bench/serve-<cpu>-<time>.json and a plot beside it (.png). The clients run in
this process, on the same CPU as the server: their work is part of the cost measured.
"""

import argparse
import asyncio
import gzip
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import torch
from bench import bench_path, environment
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from seq2seq.commands.cli import run_cli
from seq2seq.decoding.ctranslate2 import translator_from_inference
from seq2seq.decoding.loading import load_model
from seq2seq.decoding.translator import Translator

SEQ2SEQ = [sys.executable, "-m", "seq2seq"]
ROOT = Path(__file__).resolve().parents[1]
MODEL = "transformer-tiny.multi30k.en-de"
TEST_SET = ROOT.parent / "shared" / "data" / "multi30k" / "test_2016_flickr.en.gz"
HEALTH_EVERY_S = 0.1
HEALTH_TIMEOUT_S = 1.0
RSS_EVERY_S = 0.05


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--seconds", type=float, default=20.0, help="time per number of clients")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--precision", default="int8")
    parser.add_argument(
        "--engine", choices=["pytorch", "ctranslate2"], default="pytorch", help="the decoder"
    )
    parser.add_argument("--threads", type=int, help="decoding threads (default: torch's)")
    parser.add_argument("--test-set", type=Path, default=TEST_SET, help="source sentences (.gz)")
    parser.add_argument("--sentences", type=int, help="use only the first N sentences")
    parser.add_argument("--out", type=Path, help="the JSON record (default: results/bench/...)")
    return parser.parse_args()


def read_sentences(path: Path, limit: int | None) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as file:
        lines = [line.rstrip("\n") for line in file]
    return lines[:limit] if limit else lines


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    """seq2seq serve on a free loopback port, with a queue that holds every client."""
    command = [*SEQ2SEQ, "serve", "--model", args.model]
    command += ["--beam", str(args.beam), "--precision", args.precision, "--port", "0"]
    command += ["--engine", args.engine]
    command += ["--max-queue-lines", str(max(256, 2 * max(args.clients)))]
    command += ["--log-level", "warning"]
    command += ["--threads", str(args.threads)] if args.threads else []
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    first = process.stdout.readline()
    if not first.startswith("serving "):
        process.kill()
        raise SystemExit(f"error: the server did not start ({first.strip()})")
    return process, first.split(" on ")[-1].strip()


def rss_mib(pid: int) -> float:
    """The resident memory of process `pid` now (VmRSS), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def batch_histogram(metrics_text: str) -> dict[str, float]:
    """The cumulative buckets of seq2seq_batch_sentences, by upper bound, plus count and sum."""
    values = {}
    for line in metrics_text.splitlines():
        if line.startswith("seq2seq_batch_sentences_bucket"):
            bound = line.split('le="')[1].split('"')[0]
            values[bound] = float(line.rsplit(" ", 1)[1])
        elif line.startswith(("seq2seq_batch_sentences_count", "seq2seq_batch_sentences_sum")):
            name, value = line.rsplit(" ", 1)
            values[name.rsplit("_", 1)[1]] = float(value)
    return values


def batches_between(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """The decoding batches the server ran between two /metrics readings."""
    count = after["count"] - before["count"]
    buckets, below = {}, 0.0
    for bound in after:
        if bound in ("count", "sum"):
            continue
        cumulative = after[bound] - before.get(bound, 0.0)
        buckets[f"<={bound}"] = cumulative - below
        below = cumulative
    mean = (after["sum"] - before["sum"]) / count if count else 0.0
    return {"batches": count, "mean_sentences": mean, "sentences_per_batch": buckets}


async def client(
    http: httpx.AsyncClient, sentences: list[str], start: int, step: int, until: float
) -> list[tuple[str, float]]:
    """Send sentences start, start+step, ... one request at a time until `until`; returns
    (the HTTP status, or the name of the error when there was no answer, and seconds) per
    request."""
    results = []
    index = start
    while time.monotonic() < until:
        body = {"lines": [sentences[index % len(sentences)]]}
        sent = time.monotonic()
        try:
            outcome = str((await http.post("/v1/translate", json=body)).status_code)
        except httpx.HTTPError as err:
            outcome = type(err).__name__
        results.append((outcome, time.monotonic() - sent))
        index += step
    return results


async def health_checks(url: str, until: float) -> list[float]:
    """GET /healthz every HEALTH_EVERY_S until `until`, on a connection of its own; the seconds
    each took (inf: failed)."""
    seconds = []
    async with httpx.AsyncClient(base_url=url, timeout=HEALTH_TIMEOUT_S) as http:
        while time.monotonic() < until:
            sent = time.monotonic()
            try:
                ok = (await http.get("/healthz")).status_code == 200
            except httpx.HTTPError:
                ok = False
            seconds.append(time.monotonic() - sent if ok else float("inf"))
            await asyncio.sleep(HEALTH_EVERY_S)
    return seconds


async def sample_rss(pid: int, until: float) -> float:
    """The largest resident memory of `pid` seen until `until`, in MiB."""
    peak = 0.0
    while time.monotonic() < until:
        peak = max(peak, rss_mib(pid))
        await asyncio.sleep(RSS_EVERY_S)
    return peak


def percentile(values: list[float], q: int) -> float:
    """The q-th percentile of `values` (NaN for none)."""
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


async def run_level(
    url: str, pid: int, clients: int, seconds: float, sentences: list[str]
) -> dict[str, Any]:
    """`clients` concurrent clients for `seconds`, with health checks and memory sampling."""
    limits = httpx.Limits(max_connections=clients + 1, max_keepalive_connections=clients + 1)
    timeout = httpx.Timeout(120.0)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as http:
        before = batch_histogram((await http.get("/metrics")).text)
        start = time.monotonic()
        until = start + seconds
        tasks = [client(http, sentences, i, clients, until) for i in range(clients)]
        *per_client, health, peak_rss = await asyncio.gather(
            *tasks, health_checks(url, until), sample_rss(pid, until)
        )
        elapsed = time.monotonic() - start  # the clients' last answers arrive after `until`
        after = batch_histogram((await http.get("/metrics")).text)
    results = [result for one in per_client for result in one]
    statuses: dict[str, int] = {}
    for outcome, _ in results:
        statuses[outcome] = statuses.get(outcome, 0) + 1
    latencies = sorted(seconds for outcome, seconds in results if outcome == "200")
    return {
        "clients": clients,
        "seconds": elapsed,
        "requests": len(results),
        "statuses": statuses,
        "sentences_per_s": len(latencies) / elapsed,
        "latency_s": {
            "p50": percentile(latencies, 50),
            "p95": percentile(latencies, 95),
            "p99": percentile(latencies, 99),
            "max": latencies[-1] if latencies else float("nan"),
        },
        "health": {
            "checks": len(health),
            "failed": sum(s == float("inf") for s in health),
            "slowest_s": max(health, default=float("nan")),
        },
        "server_peak_rss_mib": peak_rss,
        "decoding": batches_between(before, after),
    }


def batch_mode(args: argparse.Namespace, sentences: list[str]) -> dict[str, Any]:
    """translate.py's batch mode on the same sentences, on the same engine: one `translate`
    call."""
    if args.threads:
        torch.set_num_threads(args.threads)
    inference = load_model(args.model)
    inference.config.decode.beam_size = args.beam
    inference.config.decode.precision = args.precision
    if args.engine == "ctranslate2":
        translator = translator_from_inference(inference, "cpu")
    else:
        translator = Translator.from_inference(inference, "cpu")
    start = time.perf_counter()
    translator.translate(sentences)
    seconds = time.perf_counter() - start
    return {
        "sentences": len(sentences),
        "seconds": seconds,
        "sentences_per_s": len(sentences) / seconds,
    }


def targets(levels: dict[int, dict[str, Any]], batch: dict[str, Any], idle: float) -> dict:
    """Issue 30's targets, where the levels they name were run."""
    met: dict[str, Any] = {}
    if 1 in levels and 32 in levels:
        ratio = levels[32]["sentences_per_s"] / levels[1]["sentences_per_s"]
        met["32 clients >= 4x one client"] = {"ratio": ratio, "met": ratio >= 4}
    if 32 in levels:
        share = levels[32]["sentences_per_s"] / batch["sentences_per_s"]
        met["32 clients >= 70% of batch mode"] = {"share": share, "met": share >= 0.7}
        p99 = levels[32]["latency_s"]["p99"]
        met["32 clients p99 < 1 s"] = {"p99_s": p99, "met": p99 < 1}
    if 128 in levels:
        level = levels[128]
        only = set(level["statuses"]) <= {"200", "503"} and level["health"]["failed"] == 0
        met["128 clients: only 200 and 503, health always answered"] = {"met": only}
        growth = level["server_peak_rss_mib"] / idle
        met["128 clients: RSS <= 1.5x idle"] = {"ratio": growth, "met": growth <= 1.5}
    return met


def figure(record: dict[str, Any]) -> Figure:
    levels = record["levels"]
    clients = [level["clients"] for level in levels]
    figure = Figure(figsize=(10, 4), layout="constrained")
    speed, latency = figure.subplots(1, 2)
    speed.plot(clients, [level["sentences_per_s"] for level in levels], "o-", label="server")
    speed.axhline(
        record["batch_mode"]["sentences_per_s"], color="gray", ls="--", label="batch mode"
    )
    speed.set(xscale="log", xlabel="concurrent clients", ylabel="sentences/s", ylim=(0, None))
    for q in ("p50", "p95", "p99"):
        latency.plot(clients, [level["latency_s"][q] for level in levels], "o-", label=q)
    latency.set(xscale="log", yscale="log", xlabel="concurrent clients", ylabel="latency (s)")
    for axes in (speed, latency):
        axes.set_xticks(clients, [str(n) for n in clients])
        axes.xaxis.set_minor_locator(NullLocator())
        axes.grid(True, alpha=0.3)
        axes.legend()
    env = record["environment"]
    figure.suptitle(
        f"Server load, {record['model']} ({record['precision']}, beam "
        f"{record['beam']}), on {env['device_name']} ({env['cpu_count']} cores)"
    )
    return figure


def main() -> None:
    args = parse_args()
    sentences = read_sentences(args.test_set, args.sentences)
    process, url = start_server(args)
    try:
        httpx.post(f"{url}/v1/translate", json={"lines": sentences[:8]}, timeout=60)  # warm-up
        idle = rss_mib(process.pid)
        levels = {}
        for clients in args.clients:
            levels[clients] = asyncio.run(
                run_level(url, process.pid, clients, args.seconds, sentences)
            )
            print(json.dumps(levels[clients]), flush=True)
    finally:
        process.terminate()
        process.wait(timeout=60)
    batch = batch_mode(args, sentences)
    print(json.dumps({"batch_mode": batch}), flush=True)
    record = {
        "kind": "serve_load",
        "environment": environment(torch.device("cpu")),
        "model": args.model,
        "precision": args.precision,
        "engine": args.engine,
        "beam": args.beam,
        "threads": args.threads or torch.get_num_threads(),
        "server_idle_rss_mib": idle,
        "levels": list(levels.values()),
        "batch_mode": batch,
        "targets": targets(levels, batch, idle),
    }
    out = args.out or bench_path("serve-", record["environment"]["device_name"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    figure(record).savefig(out.with_suffix(".png"), dpi=120)
    print(f"wrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    run_cli(main, tune=True)
