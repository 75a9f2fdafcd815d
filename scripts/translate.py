#!/usr/bin/env python3
"""Translate with a trained model: an interactive prompt, or line by line.

    scripts/translate.py --model transformer-tiny.multi30k.en-de   # the prompt
    scripts/translate.py --model transformer-tiny.multi30k.en-de < in.en > out.de
    scripts/translate.py --checkpoint checkpoints/transformer.multi30k.en-de/best.pt

The same code as `seq2seq translate` (seq2seq/commands/translate.py), whose options `--help`
lists.
"""

import sys

from seq2seq.commands import main

if __name__ == "__main__":
    main(["translate", *sys.argv[1:]])
