#!/usr/bin/env python3
"""Serve models over HTTP: a JSON API and LibreTranslate's API.

    scripts/serve.py --model transformer-tiny.multi30k.en-de

The same code as `seq2seq serve` (seq2seq/commands/serve.py), whose options `--help`
lists.
"""

import sys

from seq2seq.commands import main

if __name__ == "__main__":
    main(["serve", *sys.argv[1:]])
