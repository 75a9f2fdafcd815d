#!/usr/bin/env python3
"""Decoding speed of two source trees of seq2seq, side by side, request by request.

    git worktree add ../before main       # the version to compare against, in its own folder
    benchmarks/compare_decode.py ../before . --precision int8
    benchmarks/compare_decode.py ../before . --precision fp32 --one-by-one 100 --batches 10
    benchmarks/compare_decode.py . . --precision fp32 int8    # one tree, two precisions

A shared or virtual machine drifts by 10-20% in speed over minutes, more than most speed changes
are worth, so two runs one after the other cannot tell two versions apart. Here one process per
tree (each importing seq2seq from its own tree) loads the same model with the same decoding
settings (or each its own of two --precision values), and the two take turns on the same
requests, the first to go alternating: first each of the first --one-by-one lines alone (each
timed --repeats times, the fastest kept, which leaves out the pauses the machine takes), then
--batches times the first --batch-size lines in one call. Both run on --threads threads, one
after the other, never at once.

Prints, per tree, the mean and median milliseconds per sentence one at a time and the median and
best sentences/s of the batches; the ratio of the second tree's total time to the first's; and
how many outputs are the same text.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from seq2seq.commands.cli import ArgumentParser, number, run_cli
from seq2seq.config_rules import AT_LEAST_0, AT_LEAST_1, DECODE_PRECISIONS
from seq2seq.errors import UserError

MODEL = "transformer-tiny.multi30k.en-de"
count, lines = number(int, AT_LEAST_1), number(int, AT_LEAST_0)
SOURCES = "data/multi30k.en-de/test.en"


def serve_requests(model: str, sources: str, precision: str, beam: int, threads: int) -> None:
    """The process of one tree: load, warm up, then answer "start end repeats" lines on stdin
    with {"seconds": fastest of the repeats, "texts": [...]} of translating lines[start:end]."""
    import torch

    from seq2seq.decoding.open_pytorch import load_model
    from seq2seq.decoding.torch_translator import Translator

    torch.set_num_threads(threads)
    inference = load_model(model)
    inference.config.decode = replace(inference.config.decode, precision=precision, beam_size=beam)
    translator = Translator.from_inference(inference, "cpu")  # its languages for the number guard
    lines = Path(sources).read_text(encoding="utf-8").splitlines()
    translator.translate(lines[:16])
    print("ready", flush=True)
    for request in sys.stdin:
        start, end, repeats = map(int, request.split())
        fastest = float("inf")
        for _ in range(repeats):
            began = time.perf_counter()
            results = translator.translate(lines[start:end])
            fastest = min(fastest, time.perf_counter() - began)
        texts = [nbest[0].text for nbest in results]
        print(json.dumps({"seconds": fastest, "texts": texts}), flush=True)


def start_tree(tree: Path, precision: str, args: argparse.Namespace) -> subprocess.Popen:
    """A process that imports seq2seq from `tree` and serves requests (`serve_requests`)."""
    settings = [args.model, args.sources, precision, str(args.beam), str(args.threads)]
    command = [sys.executable, __file__, "--serve-requests", *settings]
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    if process.stdout.readline().strip() != b"ready":
        raise UserError(f"{tree}: its process did not start (see the error above)")
    return process


def ask(process: subprocess.Popen, start: int, end: int, repeats: int) -> dict:
    process.stdin.write(f"{start} {end} {repeats}\n".encode())
    process.stdin.flush()
    return json.loads(process.stdout.readline())


def compare(args: argparse.Namespace) -> None:
    trees = [args.first, args.second]
    precisions = args.precision * (3 - len(args.precision))  # one for each tree
    processes = [start_tree(tree, p, args) for tree, p in zip(trees, precisions, strict=True)]
    alone: list[list[float]] = [[], []]
    batched: list[list[float]] = [[], []]
    texts: list[list[str]] = [[], []]
    requests = [(i, i + 1, args.repeats, alone) for i in range(args.one_by_one)]
    requests += [(0, args.batch_size, 1, batched) for _ in range(args.batches)]
    for turn, (start, end, repeats, times) in enumerate(requests):
        for side in (0, 1) if turn % 2 == 0 else (1, 0):
            answer = ask(processes[side], start, end, repeats)
            times[side].append(answer["seconds"])
            texts[side] += answer["texts"]
    for process in processes:
        process.stdin.close()
        process.wait()
    print(f"beam {args.beam}, {args.threads} threads, {args.model}")
    for side, tree in enumerate(trees):
        report = f"{tree!s:>20} {precisions[side]}:"
        if alone[side]:
            report += f" one at a time {1000 * statistics.mean(alone[side]):.1f} ms mean,"
            report += f" {1000 * statistics.median(alone[side]):.1f} median;"
        if batched[side]:
            speeds = [args.batch_size / seconds for seconds in batched[side]]
            report += f" batch {args.batch_size} {statistics.median(speeds):.1f} sentences/s"
            report += f" median, {max(speeds):.1f} best"
        print(report)
    for name, times in (("one at a time", alone), (f"batch {args.batch_size}", batched)):
        if times[0]:
            print(f"{name}: second/first time {sum(times[1]) / sum(times[0]):.3f}")
    same = sum(a == b for a, b in zip(*texts, strict=True))
    print(f"same outputs: {same} of {len(texts[0])}")


def make_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("first", type=Path, help="a source tree of seq2seq (e.g. a git worktree)")
    parser.add_argument("second", type=Path, help="the other tree")
    parser.add_argument("--model", default=MODEL, help=f"a shipped model or folder ({MODEL})")
    parser.add_argument("--sources", default=SOURCES, help=f"one a line (default: {SOURCES})")
    parser.add_argument(
        "--precision",
        nargs="+",
        choices=DECODE_PRECISIONS,
        default=["int8"],
        help="decode.precision of both trees, or of the first and of the second (default: int8)",
    )
    parser.add_argument("--beam", type=count, default=5, help="beam size (default: 5)")
    parser.add_argument("--threads", type=count, default=2, help="torch threads (default: 2)")
    parser.add_argument(
        "--one-by-one", type=lines, default=150, help="lines decoded alone (default: 150)"
    )
    parser.add_argument(
        "--repeats", type=count, default=2, help="timings of each line alone (default: 2)"
    )
    parser.add_argument("--batches", type=lines, default=10, help="batch calls (default: 10)")
    parser.add_argument(
        "--batch-size", type=count, default=256, help="lines per batch call (default: 256)"
    )
    return parser


def main() -> None:
    if sys.argv[1:2] == ["--serve-requests"]:
        model, sources, precision, beam, threads = sys.argv[2:]
        serve_requests(model, sources, precision, int(beam), int(threads))
        return
    parser = make_parser()
    args = parser.parse_args()
    if len(args.precision) > 2:
        parser.error("--precision: one value for both trees, or two")
    for tree in (args.first, args.second):
        if not (tree / "seq2seq" / "__init__.py").is_file():
            raise UserError(f"{tree}: not a source tree of seq2seq (no seq2seq/__init__.py)")
    if not Path(args.sources).is_file():
        raise UserError(f"--sources {args.sources}: no such file (make data prepares it)")
    compare(args)


if __name__ == "__main__":
    run_cli(main, tune=True)
