"""User-facing errors: one line on stderr and a non-zero exit, never a traceback."""


class UserError(Exception):
    """A problem with the user's input (a file, an option, a configuration value).

    The message names what is wrong and where; `seq2seq.commands.cli.run_cli` prints it as one line.
    """
