#!/usr/bin/env python3
"""Average the weights of the last checkpoints of a run into one.

    scripts/average_checkpoints.py --out avg5.pt --last 5 checkpoints/transformer.multi30k.en-de

The same code as `seq2seq average` (seq2seq/commands/average.py), whose options `--help`
lists.
"""

import sys

from seq2seq.commands import main

if __name__ == "__main__":
    main(["average", *sys.argv[1:]])
