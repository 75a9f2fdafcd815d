#!/usr/bin/env python3
"""Can clients that misbehave starve a normal one? Two trials against a real server.

    benchmarks/serve_starvation.py                  # alone, 1,000 slow bodies, heavy requests
    benchmarks/serve_starvation.py --seconds 10     # a quick look

Starts `seq2seq serve` with the shipped en-de model on a free loopback port, then runs, for
--seconds each, one normal client that sends one Multi30k test sentence per request (the next
as soon as it has its answer), alone (the baseline) and beside:

    slow-bodies   --sockets connections (1,000) from 127.0.0.2 that each send a request's
                  headers and one byte of a declared 1,026-byte body, then nothing; each one
                  the server closes is opened again at once, so that as many wait all the time;
    heavy         one heavy request every 10 s from another client: the heaviest the server
                  allows, 64 lines of 22 pieces that the model never ends, at beam 16 and
                  max_len_ratio 10 (16 x 240 beam steps, within --max-beam-steps 4,000).

Measured per trial: the normal client's answers by status, their p50/p99/max latency, and what
the others got. Target: every normal request answered with 200, p99 under 2 s. The normal and
the heavy client send API keys of their own (`--api-keys`), so that the server's fair queue
tells them apart: on loopback both have the same address. Writes
results/bench/starvation-<cpu>-<time>.json. Everything runs on this machine, over loopback.
"""

import argparse
import json
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import torch
from measure import bench_path, environment
from serve_load import MODEL, TEST_SET, read_sentences

SEQ2SEQ = [sys.executable, "-m", "seq2seq"]
HEAVY_TEXT = " ".join(["zq xv"] * 4 + ["zq"])  # 22 pieces, which the model does not end
HEAVY_EVERY_S = 10.0
ATTACKER = "127.0.0.2"  # the slow bodies' address: another client than the normal one
TARGET_P99_S = 2.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each trial")
    parser.add_argument("--sockets", type=int, default=1000, help="slow-body connections")
    parser.add_argument("--trials", nargs="+", default=["alone", "slow-bodies", "heavy"])
    parser.add_argument("--out", type=Path, help="the JSON to write (default: results/bench/)")
    return parser.parse_args()


def start_server(keys: Path) -> tuple[subprocess.Popen, str]:
    keys.write_text("normal-key 0\nheavy-key 0\n", encoding="utf-8")
    command = [*SEQ2SEQ, "serve", "--model", MODEL, "--port", "0", "--log-level", "error"]
    command += ["--api-keys", str(keys)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    first = process.stdout.readline()
    if not first.startswith("serving "):
        process.kill()
        raise SystemExit(f"error: the server did not start ({first.strip()})")
    return process, first.split(" on ")[-1].strip()


def normal_client(url: str, sentences: list[str], until: float) -> dict[str, Any]:
    """One request at a time until `until`: statuses and latencies."""
    statuses: dict[str, int] = {}
    latencies: list[float] = []
    with httpx2.Client(timeout=60, headers={"authorization": "Bearer normal-key"}) as client:
        for sentence in sentences * 100:
            if time.monotonic() >= until:
                break
            started = time.monotonic()
            try:
                status = str(
                    client.post(f"{url}/v1/translate", json={"lines": [sentence]}).status_code
                )
            except httpx2.HTTPError as err:
                status = type(err).__name__
            latencies.append(time.monotonic() - started)
            statuses[status] = statuses.get(status, 0) + 1
    ordered = sorted(latencies)
    p99 = statistics.quantiles(ordered, n=100, method="inclusive")[98] if len(ordered) > 1 else 0
    return {
        "requests": len(latencies),
        "statuses": statuses,
        "p50_s": round(statistics.median(ordered), 3) if ordered else None,
        "p99_s": round(p99, 3),
        "max_s": round(ordered[-1], 3) if ordered else None,
        "target_met": set(statuses) == {"200"} and p99 < TARGET_P99_S,
    }


def slow_bodies(url: str, count: int, until: float, seen: dict[str, int]) -> None:
    """Keep `count` connections that send a head and one byte of their body open until `until`;
    count the answers the server gives them (by status; "closed": none)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    head = (
        b"POST /v1/translate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1026\r\n\r\n{"
    )
    waiting = selectors.DefaultSelector()
    while time.monotonic() < until:
        while len(waiting.get_map()) < count and time.monotonic() < until:
            sock = socket.socket()
            try:
                sock.bind((ATTACKER, 0))
                sock.connect((host, int(port)))
                sock.sendall(head)
            except OSError:
                sock.close()
                seen["refused"] = seen.get("refused", 0) + 1
                break
            waiting.register(sock, selectors.EVENT_READ)
            seen["opened"] = seen.get("opened", 0) + 1
        for key, _ in waiting.select(timeout=0.1):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                answer = sock.recv(200)
            except OSError:
                answer = b""
            status = answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/") else "closed"
            seen[status] = seen.get(status, 0) + 1
            waiting.unregister(sock)
            sock.close()
    for key in list(waiting.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]


def heavy_client(url: str, until: float, seen: dict[str, int]) -> None:
    """The heaviest allowed request every HEAVY_EVERY_S until `until`."""
    request = {"lines": [HEAVY_TEXT] * 64, "beam": 16, "max_len_ratio": 10.0}
    with httpx2.Client(timeout=120, headers={"authorization": "Bearer heavy-key"}) as client:
        while time.monotonic() < until:
            started = time.monotonic()
            status = str(client.post(f"{url}/v1/translate", json=request).status_code)
            seen[status] = seen.get(status, 0) + 1
            seen["longest_s"] = max(seen.get("longest_s", 0), round(time.monotonic() - started))
            time.sleep(max(0.0, started + HEAVY_EVERY_S - time.monotonic()))


def trial(name: str, url: str, args: argparse.Namespace, sentences: list[str]) -> dict:
    until = time.monotonic() + args.seconds
    others: dict[str, int] = {}
    other = None
    if name == "slow-bodies":
        other = threading.Thread(target=slow_bodies, args=(url, args.sockets, until, others))
    elif name == "heavy":
        other = threading.Thread(target=heavy_client, args=(url, until, others))
    if other is not None:
        other.start()
        time.sleep(1.0 if name == "slow-bodies" else 0.2)  # the others are in place first
    normal = normal_client(url, sentences, until)
    if other is not None:
        other.join()
    return {"normal": normal, "others": others}


def main() -> None:
    args = parse_args()
    sentences = read_sentences(TEST_SET, 200)
    with tempfile.TemporaryDirectory() as tmp:
        process, url = start_server(Path(tmp) / "keys")
    try:
        httpx2.post(f"{url}/v1/translate", json={"lines": sentences[:4]}, timeout=60)  # warm-up
        trials = {name: trial(name, url, args, sentences) for name in args.trials}
    finally:
        process.terminate()
        process.wait(timeout=60)
    record = {
        "kind": "starvation",
        "environment": environment(torch.device("cpu")),
        "seconds": args.seconds,
        "sockets": args.sockets,
        "trials": trials,
    }
    out = args.out or bench_path("starvation-", record["environment"]["device_name"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(trials, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
