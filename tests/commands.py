"""The `seq2seq` command as tests start it: `python -m seq2seq`, the installed command's code."""

import sys

SEQ2SEQ = [sys.executable, "-m", "seq2seq"]
