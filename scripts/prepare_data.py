#!/usr/bin/env python3
"""Prepare a parallel corpus: download, clean, train sentencepiece, tokenize.

    scripts/prepare_data.py --corpus multi30k --src en --tgt de
    scripts/prepare_data.py --corpus tatoeba --src en --tgt fr --mirror ../shared/data

The same code as `seq2seq prepare` (seq2seq/commands/prepare.py), whose options `--help`
lists.
"""

import sys

from seq2seq.commands import main

if __name__ == "__main__":
    main(["prepare", *sys.argv[1:]])
