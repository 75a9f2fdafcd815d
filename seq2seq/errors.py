"""User-facing errors: one line on stderr and a non-zero exit, never a traceback."""

import sys
from collections.abc import Callable


class UserError(Exception):
    """A problem with the user's input (a file, an option, a configuration value).

    The message names what is wrong and where; `run_cli` prints it as one line.
    """


def run_cli(main: Callable[[], None]) -> None:
    """Run a script's `main`, turning `UserError` and Ctrl-C into a one-line error and exit code."""
    try:
        main()
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
