#!/usr/bin/env python3
"""Align words of sentence pairs through the model's attention; score them against gold (AER).

    scripts/align.py --model transformer-small.tatoeba.en-fr < pairs.txt

The same code as `seq2seq align` (seq2seq/commands/align.py), whose options `--help` lists.
"""

import sys

from seq2seq.commands import main

if __name__ == "__main__":
    main(["align", *sys.argv[1:]])
