#!/usr/bin/env python3
"""Score a model with beam search and sacreBLEU: BLEU, lowercased BLEU, chrF.

    scripts/evaluate.py --checkpoint checkpoints/transformer.multi30k.en-de/best.pt
    scripts/evaluate.py --model transformer-tiny.multi30k.en-de --beam 5 --precision fp32

The same code as `seq2seq evaluate` (seq2seq/commands/evaluate.py), whose options `--help`
lists.
"""

import sys

from seq2seq.commands import main

if __name__ == "__main__":
    main(["evaluate", *sys.argv[1:]])
