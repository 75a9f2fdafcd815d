#!/usr/bin/env python3
"""Train a translation model from a configuration; run it again to resume.

    scripts/train.py --config configs/transformer.multi30k.en-de.toml --prepare
    scripts/train.py --config configs/gru.multi30k.en-de.toml train.lr=1e-3

The same code as `seq2seq train` (seq2seq/commands/train.py), whose options `--help`
lists.
"""

import sys

from seq2seq.commands import main

if __name__ == "__main__":
    main(["train", *sys.argv[1:]])
