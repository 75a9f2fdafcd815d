#!/usr/bin/env python3
"""Load benchmark of the HTTP server (seq2seq serve), beside translate.py's batch mode.

    benchmarks/serve_load.py                               # 1, 8, 32, 128 clients, 20 s each
    benchmarks/serve_load.py --clients 1 32 --seconds 5    # a quick look
    benchmarks/serve_load.py --engines ctranslate2         # one engine only

For each engine (by default both, one after the other in the same run): starts a real server
process on a free loopback port with the shipped en-de model (fp32, beam 5 by default), then for
each number of clients runs that many concurrent clients for a fixed time, each sending one
Multi30k test sentence per request and the next as soon as it has its answer. The PyTorch
engine serves the shipped model; the CTranslate2 engine serves the folder `seq2seq export
--format ctranslate2` writes of it, a translate-only server that never imports torch, whose
peak memory is compared with CTranslate2's own, called directly on the same folder in a
process of its own (benchmarks/ctranslate2_bench.py's `ctranslate2` system).

Measured per level: answered sentences/s, p50/p95/p99 latency of the answered requests, the
answers by HTTP status (200, and 503 past the queue's bound), the decoding batch sizes the
server's /metrics saw, the server's resident memory (sampled every 50 ms; its idle value is
taken after a warm-up request), and the slowest of the health checks sent every 100 ms
meanwhile. Then, in this process, the same model on the same engine decodes the whole
test set as translate.py's batch mode does (`translate`, model loading excluded).

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
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator
from measure import bench_path, environment, rss_mib, timed_call, write_record

from seq2seq.commands.cli import run_cli
from seq2seq.decoding.ct2_folder import check_folder
from seq2seq.decoding.ct2_translator import CTranslate2Translator
from seq2seq.decoding.export import export_ctranslate2
from seq2seq.decoding.line_translator import LineTranslator
from seq2seq.decoding.model_folder import CARD, find_model
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.decoding.torch_translator import Translator

SEQ2SEQ = [sys.executable, "-m", "seq2seq"]
ROOT = Path(__file__).resolve().parents[1]
MODEL = "transformer-tiny.multi30k.en-de"
TEST_SET = ROOT.parent / "shared" / "data" / "multi30k" / "test_2016_flickr.en.gz"
HEALTH_EVERY_S = 0.1
HEALTH_TIMEOUT_S = 1.0
RSS_EVERY_S = 0.05
ENGINES = ["pytorch", "ctranslate2"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--seconds", type=float, default=20.0, help="time per number of clients")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument(
        "--engines",
        nargs="+",
        choices=ENGINES,
        default=ENGINES,
        help="the decoders, one server each",
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


def start_server(args: argparse.Namespace, engine: str, model: str) -> tuple[subprocess.Popen, str]:
    """seq2seq serve of `model` on `engine` on a free loopback port, with a queue that holds
    every client."""
    command = [*SEQ2SEQ, "serve", "--model", model, "--engine", engine]
    command += ["--beam", str(args.beam), "--precision", args.precision, "--port", "0"]
    command += ["--max-queue-lines", str(max(256, 2 * max(args.clients)))]
    command += ["--log-level", "warning"]
    command += ["--threads", str(args.threads)] if args.threads else []
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    first = process.stdout.readline()
    if not first.startswith("serving "):
        process.kill()
        raise SystemExit(f"error: the server did not start ({first.strip()})")
    return process, first.split(" on ")[-1].strip()


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
    http: httpx2.AsyncClient, sentences: list[str], start: int, step: int, until: float
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
        except httpx2.HTTPError as err:
            outcome = type(err).__name__
        results.append((outcome, time.monotonic() - sent))
        index += step
    return results


async def health_checks(url: str, until: float) -> list[float]:
    """GET /healthz every HEALTH_EVERY_S until `until`, on a connection of its own; the seconds
    each took (inf: failed)."""
    seconds = []
    async with httpx2.AsyncClient(base_url=url, timeout=HEALTH_TIMEOUT_S) as http:
        while time.monotonic() < until:
            sent = time.monotonic()
            try:
                ok = (await http.get("/healthz")).status_code == 200
            except httpx2.HTTPError:
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
    limits = httpx2.Limits(max_connections=clients + 1, max_keepalive_connections=clients + 1)
    timeout = httpx2.Timeout(120.0)
    async with httpx2.AsyncClient(base_url=url, limits=limits, timeout=timeout) as http:
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


def translator_of(args: argparse.Namespace, engine: str, folder: Path) -> LineTranslator:
    """The translator a server of `engine` runs: the shipped model in PyTorch, or its
    CTranslate2 `folder`, with the benchmark's beam and precision."""
    if engine == "ctranslate2":
        config, src_tokenizer, tgt_tokenizer = check_folder(folder)
        config.decode.beam_size, config.decode.precision = args.beam, args.precision
        return CTranslate2Translator.open(
            folder, src_tokenizer, tgt_tokenizer, config.decode, threads=args.threads
        )
    inference = load_model(args.model)
    inference.config.decode.beam_size = args.beam
    inference.config.decode.precision = args.precision
    return Translator.from_inference(inference, "cpu")


def batch_mode(translator: LineTranslator, sentences: list[str]) -> dict[str, Any]:
    """translate.py's batch mode on the same sentences, on the same engine: one `translate`
    call."""
    _, seconds = timed_call(translator.translate, sentences)
    return {
        "sentences": len(sentences),
        "seconds": seconds,
        "sentences_per_s": len(sentences) / seconds,
    }


def direct_peak_rss_mib(folder: Path, sentences: list[str], tmp: Path) -> float:
    """The peak RSS of a process that calls CTranslate2 directly on `folder` (no seq2seq, no
    torch) and translates `sentences` in batches and one at a time (ctranslate2_bench.py)."""
    source = tmp / "sentences.txt"
    source.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    script = Path(__file__).with_name("ctranslate2_bench.py")
    command = [sys.executable, str(script), "--single", "20"]
    command += ["--worker", "ctranslate2", "-", str(folder), str(source)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["peak_mib"]


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
    figure = Figure(figsize=(10, 4), layout="constrained")
    speed, latency = figure.subplots(1, 2)
    for (engine, run), color in zip(record["engines"].items(), ("C0", "C1"), strict=False):
        levels = run["levels"]
        clients = [level["clients"] for level in levels]
        speeds = [level["sentences_per_s"] for level in levels]
        speed.plot(clients, speeds, "o-", color=color, label=f"{engine} server")
        batch = run["batch_mode"]["sentences_per_s"]
        speed.axhline(batch, color=color, ls="--", label=f"{engine} batch mode")
        for q, style in (("p50", "o-"), ("p99", "s:")):
            values = [level["latency_s"][q] for level in levels]
            latency.plot(clients, values, style, color=color, label=f"{engine} {q}")
    speed.set(xscale="log", xlabel="concurrent clients", ylabel="sentences/s", ylim=(0, None))
    latency.set(xscale="log", yscale="log", xlabel="concurrent clients", ylabel="latency (s)")
    for axes in (speed, latency):
        axes.set_xticks(clients, [str(n) for n in clients])
        axes.xaxis.set_minor_locator(NullLocator())
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize="small")
    env = record["environment"]
    figure.suptitle(
        f"Server load, {record['model']} ({record['precision']}, beam "
        f"{record['beam']}), on {env['device_name']} ({env['cpu_count']} cores)"
    )
    return figure


def run_engine(
    args: argparse.Namespace, engine: str, folder: Path, sentences: list[str]
) -> dict[str, Any]:
    """One engine's server at every number of clients, then its batch mode."""
    process, url = start_server(
        args, engine, str(folder) if engine == "ctranslate2" else args.model
    )
    try:
        httpx2.post(f"{url}/v1/translate", json={"lines": sentences[:8]}, timeout=60)  # warm-up
        idle = rss_mib(process.pid)
        levels = {}
        for clients in args.clients:
            levels[clients] = asyncio.run(
                run_level(url, process.pid, clients, args.seconds, sentences)
            )
            print(json.dumps({"engine": engine, **levels[clients]}), flush=True)
    finally:
        process.terminate()
        process.wait(timeout=60)
    batch = batch_mode(translator_of(args, engine, folder), sentences)
    print(json.dumps({"engine": engine, "batch_mode": batch}), flush=True)
    return {
        "server_idle_rss_mib": idle,
        "levels": list(levels.values()),
        "batch_mode": batch,
        "targets": targets(levels, batch, idle),
    }


def main() -> None:
    args = parse_args()
    sentences = read_sentences(args.test_set, args.sentences)
    if args.threads:
        torch.set_num_threads(args.threads)
    runs = {}
    with tempfile.TemporaryDirectory(prefix="serve-load-") as tmp:
        folder = Path(tmp) / "ct2"
        if "ctranslate2" in args.engines:
            model = find_model(args.model)
            export_ctranslate2(load_model(args.model), folder, model / CARD)
        for engine in args.engines:
            runs[engine] = run_engine(args, engine, folder, sentences)
        if "ctranslate2" in args.engines:
            run = runs["ctranslate2"]
            direct = direct_peak_rss_mib(folder, sentences, Path(tmp))
            peak = max(level["server_peak_rss_mib"] for level in run["levels"])
            run["direct_peak_rss_mib"] = direct
            run["targets"]["translate-only server peak RSS <= 2x CTranslate2 direct"] = {
                "ratio": peak / direct,
                "met": peak <= 2 * direct,
            }
    record = {
        "kind": "serve_load",
        "environment": environment(torch.device("cpu")),
        "model": args.model,
        "precision": args.precision,
        "beam": args.beam,
        "threads": args.threads or torch.get_num_threads(),
        "engines": runs,
    }
    out = args.out or bench_path("serve-", record["environment"]["device_name"])
    write_record(record, out)
    figure(record).savefig(out.with_suffix(".png"), dpi=120)
    print(f"wrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    run_cli(main, tune=True)
