"""User-facing errors: one line on stderr and a non-zero exit, never a traceback."""

import os
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
    except BrokenPipeError:
        # The reader went away (`... | head`): stop quietly, as command-line tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
