"""Stopping training cleanly on Ctrl-C (SIGINT) or SIGTERM (a cluster's preemption, `kill`).

The first signal only sets `received`: the loop finishes its update, saves last.pt and calls
`exit`, which leaves with the shell's code for that signal (130 for SIGINT, 143 for SIGTERM).
A second signal gives up at once, even in the middle of that save: checkpoints are written to a
temporary file and renamed (seq2seq.files), so the previous last.pt stays as it was.
"""

import signal
import sys
from types import FrameType
from typing import NoReturn

HANDLED = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """While active (`with StopSignals() as signals:`), SIGINT and SIGTERM request a stop."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.previous: dict[int, object] = {}

    @property
    def received(self) -> bool:
        return self.signum is not None

    def __enter__(self) -> "StopSignals":
        for signum in HANDLED:
            self.previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
            return
        print("\nsecond signal: stopped at once; the last checkpoint is as it was", file=sys.stderr)
        raise SystemExit(128 + signum)

    def exit(self, message: str, announce: bool = True) -> NoReturn:
        """Leave with 128 + the signal's number, after printing `message` on a line of its own."""
        if announce:
            print(f"{message}; run the same command to resume", file=sys.stderr)
        raise SystemExit(128 + (self.signum or signal.SIGTERM))  # another rank's signal: TERM
