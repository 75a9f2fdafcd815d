#!/usr/bin/env python3
"""Serve trained models over HTTP (docs/serve.md): a JSON translation API that batches
concurrent requests, LibreTranslate's API, health and Prometheus metrics.

    scripts/serve.py --model transformer-tiny.multi30k.en-de                  # 127.0.0.1:8000
    scripts/serve.py --model transformer-tiny.multi30k.en-de \\
        --model transformer-tiny.multi30k.de-en --port 8080                   # two models
    scripts/serve.py --checkpoint checkpoints/run/best.pt --precision fp32

SIGTERM or Ctrl-C: stop accepting, answer the requests in flight, exit.
"""

from seq2seq.cli import run_cli
from seq2seq.serving.main import main

if __name__ == "__main__":
    run_cli(main, tune=True)
