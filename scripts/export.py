#!/usr/bin/env python3
"""Export a checkpoint as a small model folder that translates on its own.

    scripts/export.py --checkpoint checkpoints/transformer.multi30k.en-de/best.pt

The same code as `seq2seq export` (seq2seq/commands/export.py), whose options `--help`
lists.
"""

import sys

from seq2seq.commands import main

if __name__ == "__main__":
    main(["export", *sys.argv[1:]])
