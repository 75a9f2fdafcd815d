"""The `seq2seq` command as tests start it: `python -m seq2seq`, the installed command's code."""

import signal
import sys

SEQ2SEQ = [sys.executable, "-m", "seq2seq"]


def default_sigint() -> None:
    """A `preexec_fn` giving the child the default SIGINT, as in a terminal: a shell that starts
    pytest in the background makes it ignore SIGINT, and its children would inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
