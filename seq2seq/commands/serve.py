"""Serve trained models over HTTP (docs/serve.md): a JSON translation API that batches
concurrent requests, LibreTranslate's API, health and Prometheus metrics.

    seq2seq serve --model transformer-tiny.multi30k.en-de                  # 127.0.0.1:8000
    seq2seq serve --model transformer-tiny.multi30k.en-de \\
        --model transformer-tiny.multi30k.de-en --port 8080                 # two models
    seq2seq serve --checkpoint checkpoints/run/best.pt --precision fp32

This command loads the models, binds the port and runs uvicorn on the app of seq2seq.serving.

The models come from the command line only (`--model`, `--checkpoint`, each repeatable); no
request can name a file. SIGTERM or Ctrl-C (SIGINT) stops the server gracefully: it stops
accepting connections, answers the requests in flight, lets the worker finish, and exits 0; a
second Ctrl-C stops it at once.

Who may connect, how often and for how long (the Host header, API keys, rate limits, trusted
proxies, timeouts, concurrency) is in docs/serve.md, "Reliability".
"""

from __future__ import annotations

import argparse
import collections
import functools
import ipaddress
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from seq2seq.commands.cli import (
    add_decode_options,
    add_plain_option,
    apply_decode_options,
    command_parser,
    number,
    ranged,
)
from seq2seq.config_rules import ARGUMENTS, AT_LEAST_0, AT_LEAST_1, POSITIVE, Range
from seq2seq.errors import UserError
from seq2seq.serving.limits import Limits

if TYPE_CHECKING:  # the functions import what serves and decodes, so --help answers at once
    from seq2seq.serving.access import Access
    from seq2seq.serving.registry import ServedModel

DEFAULTS = Limits()
TUNE = False  # tuned for torch once a PyTorch model loads (load_pytorch_model)
DESCRIPTION = (
    "Serve trained models over HTTP: a JSON translation API (docs/serve.md). "
    "On a CPU, models decode in int8 unless --precision says otherwise."
)


def parse_args(
    argv: list[str], command: str = "serve", description: str = DESCRIPTION
) -> argparse.Namespace:
    """The server's options; `seq2seq explore` parses the same under its own name."""
    parser = command_parser(command, description)
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME|FOLDER",
        help="an exported model: the name of a shipped one (e.g. transformer-tiny.multi30k.en-de; "
        "seq2seq explore serves them all) or a folder from seq2seq export; repeat for several",
    )
    parser.add_argument(
        "--checkpoint", action="append", default=[], help="a checkpoint written by training"
    )
    parser.add_argument(
        "--run",
        metavar="RUN_FOLDER",
        help="a run folder (or its attention_history.safetensors): the explorer's training "
        "page shows its attention step by step",
    )
    parser.add_argument(
        "--gold",
        nargs=2,
        metavar=("PAIRS", "GOLD"),
        help="sentence pairs (SOURCE ||| TARGET a line) and their gold links, as seq2seq align "
        "--input PAIRS --gold GOLD reads them: the explorer scores every head on them",
    )
    add_plain_option(parser)
    add_decode_options(
        parser,
        batch_size_help=f"the most sentences in one batch, by default {DEFAULTS.batch_sentences}",
    )
    parser.add_argument(
        "--threads",
        type=number(int, AT_LEAST_1),
        help="threads a decoding batch runs on (default: one per core)",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    parser.add_argument(
        "--port", type=number(int, Range(0, 65535)), default=8000, help="0: any free port"
    )
    add_limit_options(parser)
    add_access_options(parser)
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    return parser.parse_args(argv)


def add_limit_options(parser: argparse.ArgumentParser) -> None:
    """The options of `Limits` (see its docstring), with its defaults."""
    for option, kind, valid, default, help_text in (
        ("--max-lines", int, AT_LEAST_1, DEFAULTS.max_lines, "lines per request"),
        ("--max-line-chars", int, AT_LEAST_1, DEFAULTS.max_line_chars, "characters per line"),
        ("--max-body-bytes", int, AT_LEAST_1, DEFAULTS.max_body_bytes, "bytes per request body"),
        ("--max-beam", int, ARGUMENTS["beam"], DEFAULTS.max_beam, "beam size a request "
         "may ask for"),
        ("--max-beam-steps", int, AT_LEAST_1, DEFAULTS.max_beam_steps, "a request's beam x "
         "the longest output its lines may have; past it: 413"),
        ("--max-queue-lines", int, AT_LEAST_1, DEFAULTS.max_queue_lines, "lines waiting to be "
         "decoded; past it: 503"),
        ("--timeout", float, POSITIVE, DEFAULTS.timeout_s, "seconds a request may wait for its "
         "answer; past it: 504"),
        ("--batch-wait-ms", float, AT_LEAST_0, DEFAULTS.batch_wait_s * 1000, "milliseconds a "
         "request waits for others to share its decoding batch"),
    ):  # fmt: skip
        parser.add_argument(
            option, default=default, **ranged(kind, valid, help_text, "%(default)s")
        )


def add_access_options(parser: argparse.ArgumentParser) -> None:
    """Who may connect, how often, and how long a connection may hold a socket."""
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name requests may name in their Host header, besides localhost, "
        "127.0.0.1, [::1] and --host; repeat for several",
    )
    parser.add_argument(
        "--api-keys",
        metavar="FILE",
        help="API keys, one a line: KEY, or KEY REQUESTS_PER_MINUTE (sent as LibreTranslate's "
        "api_key field or an Authorization: Bearer header)",
    )
    parser.add_argument(
        "--require-api-key", action="store_true", help="refuse requests without a key (403)"
    )
    parser.add_argument(
        "--forwarded-allow-ips",
        metavar="ADDRESSES",
        help="the proxies (comma-separated addresses or networks, * for any) whose "
        "X-Forwarded-For and X-Forwarded-Proto headers name the client; by default none",
    )
    for option, kind, valid, default, help_text in (
        ("--req-limit", int, AT_LEAST_0, 0, "decoding requests per minute of each client "
         "address without a key, and of each key without its own limit; 0: no limit"),
        ("--header-timeout", float, POSITIVE, 10.0, "seconds a client has to send a request's "
         "headers"),
        ("--body-timeout", float, POSITIVE, 10.0, "seconds a client has to send a request's "
         "body after its headers; past it: 408"),
        ("--keep-alive", float, POSITIVE, 5.0, "seconds an idle connection stays open"),
        ("--limit-concurrency", int, AT_LEAST_1, 1000, "connections and requests served at "
         "once; past it: 503"),
    ):  # fmt: skip
        parser.add_argument(
            option, default=default, **ranged(kind, valid, help_text, "%(default)s")
        )


def access_of(args: argparse.Namespace, bound_host: str) -> Access:
    from seq2seq.serving.access import Access, allowed_hosts, read_keys

    if args.require_api_key and not args.api_keys:
        raise UserError("--require-api-key: give the keys with --api-keys FILE")
    keys = read_keys(Path(args.api_keys)) if args.api_keys else {}
    return Access(
        allowed_hosts=allowed_hosts(bound_host, args.allowed_host),
        keys=keys,
        require_key=args.require_api_key,
        per_minute=args.req_limit,
    )


def limits_of(args: argparse.Namespace) -> Limits:
    return Limits(
        max_lines=args.max_lines,
        max_line_chars=args.max_line_chars,
        max_body_bytes=args.max_body_bytes,
        max_beam=args.max_beam,
        max_beam_steps=args.max_beam_steps,
        max_queue_lines=args.max_queue_lines,
        timeout_s=args.timeout,
        batch_sentences=args.batch_size or DEFAULTS.batch_sentences,
        batch_wait_s=args.batch_wait_ms / 1000,
    )


def load_models(args: argparse.Namespace) -> dict[str, ServedModel]:
    """The models of --model and --checkpoint, by name (the first is the default), each with
    the decoding options applied, on the engine --engine picks. A CTranslate2 folder, and with
    --engine ctranslate2 a shipped or exported Transformer, is served without torch (and
    without the attention explorer); torch is imported, and the process tuned for it, only for
    a PyTorch model (`load_pytorch_model`), which --engine auto keeps beside CTranslate2 for the
    explorer."""
    from seq2seq.commands.engine import open_without_torch
    from seq2seq.serving.registry import served_folder

    sources = [("--model", name) for name in args.model]
    sources += [("--checkpoint", path) for path in args.checkpoint]
    models: dict[str, ServedModel] = {}
    for option, given in sources:
        opened = None
        if option == "--model":
            explorer = args.engine == "auto"
            opened = open_without_torch(args, given, args.threads, need_pytorch=explorer)
        if opened is not None:
            folder, translator, config = opened.folder, opened.translator, opened.config
            served = served_folder(folder.name, folder, translator, config, opened.parameters)
        else:
            served = load_pytorch_model(args, option, given)
        if served.name in models:
            raise UserError(f"{option} {given}: a second model named {served.name!r}")
        models[served.name] = served
    return models


def load_pytorch_model(args: argparse.Namespace, option: str, given: str) -> ServedModel:
    """The model of `option` (--model or --checkpoint) `given`, on the engine --engine picks;
    on a CPU the PyTorch engine decodes in int8 unless --precision says else (CTranslate2 in
    fp32: its int8 is slower one sentence at a time)."""
    import torch

    from seq2seq.commands.engine import pytorch_device
    from seq2seq.decoding.ct2_engine import use_ctranslate2
    from seq2seq.decoding.open_pytorch import load_model
    from seq2seq.serving.registry import served_model, served_name

    device = pytorch_device(args)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    kind = "exported" if option == "--model" else "checkpoint"
    inference = load_model(given, device, args.plain, kind)
    decode_cfg = inference.config.decode
    ctranslate2 = use_ctranslate2(args.engine, inference.config)
    if args.precision is None and device.type == "cpu" and not ctranslate2:
        decode_cfg.precision = "int8"
    apply_decode_options(args, decode_cfg)
    return served_model(served_name(inference), inference, device, ctranslate2)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port; a port in use or an unknown host is a UserError."""
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        family = socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except (OSError, OverflowError) as err:
        sock.close()
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise UserError(f"--host {host} --port {port}: cannot listen there ({reason})") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def stopped(signum: int, frame: FrameType | None) -> None:
    """SIGTERM or SIGINT once uvicorn has shut down gracefully: nothing more to do, exit 0.

    uvicorn sends the signal it caught to the process again after its shutdown, so that the
    previous handler runs; Python's defaults would end the process with 143 (SIGTERM) or a
    KeyboardInterrupt (SIGINT) after every request had been answered."""


def main(argv: list[str]) -> None:
    serve(parse_args(argv))


def serve(args: argparse.Namespace) -> None:
    """Load the models `args` names, bind the port and serve until SIGTERM or Ctrl-C."""
    import uvicorn

    from seq2seq.serving.access import HideKeys
    from seq2seq.serving.app import create_app
    from seq2seq.serving.http_errors import MAX_HEAD_BYTES
    from seq2seq.serving.protocol import GuardedH11Protocol

    if not args.model and not args.checkpoint:
        raise UserError("give at least one --model or --checkpoint (see seq2seq serve --help)")
    # The decoding threads sleep when idle instead of spinning: they share the cores with the
    # event loop, which parses and answers requests meanwhile (docs/benchmarks.md).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    history = None
    if args.run:
        from seq2seq.training.attention_history import run_history_file  # imports torch

        history = run_history_file("--run", args.run)
    gold = None
    if args.gold:
        from seq2seq.commands.align import read_gold_file

        gold = read_gold_file(*args.gold)
    access = access_of(args, args.host)
    sock = bind(args.host, args.port)
    if not is_loopback(args.host) and not access.require_key:
        print(
            f"warning: --host {args.host}: reachable from other machines, by anyone "
            "(--require-api-key asks for a key)",
            file=sys.stderr,
        )
    app = create_app(load_models(args), limits_of(args), access, history, gold)
    host, port = sock.getsockname()[:2]
    print(f"serving {', '.join(app.state.server.models)} on http://{host}:{port}", flush=True)
    logging.getLogger("seq2seq").setLevel(args.log_level.upper())
    config = uvicorn.Config(
        app,
        log_level=args.log_level,
        timeout_graceful_shutdown=None,
        http=functools.partial(
            GuardedH11Protocol,
            header_timeout_s=args.header_timeout,
            body_timeout_s=args.body_timeout,
            addresses=collections.Counter(),
        ),
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        timeout_keep_alive=args.keep_alive,
        limit_concurrency=args.limit_concurrency,
        # uvicorn trusts X-Forwarded-For from 127.0.0.1 by default: any local client could pass
        # for another address, and past --req-limit
        proxy_headers=args.forwarded_allow_ips is not None,
        forwarded_allow_ips=args.forwarded_allow_ips,
    )
    logging.getLogger("uvicorn.access").addFilter(HideKeys())
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stopped)
    uvicorn.Server(config).run(sockets=[sock])
