#!/usr/bin/env python3
"""The attention explorer in the browser, with every shipped model.

    scripts/explore.py               # http://127.0.0.1:8000/

The same code as `seq2seq explore` (seq2seq/commands/explore.py), whose options `--help`
lists.
"""

import sys

from seq2seq.commands import main

if __name__ == "__main__":
    main(["explore", *sys.argv[1:]])
