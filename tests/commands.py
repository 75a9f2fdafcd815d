"""The `seq2seq` command as tests start it: `python -m seq2seq`, the installed command's code."""

import signal
import subprocess
import sys

import pytest

SEQ2SEQ = [sys.executable, "-m", "seq2seq"]


def run_in_process(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`seq2seq ARGV` run in this process, where starting a Python that imports torch would
    take seconds: its exit status, standard output and standard error."""
    from seq2seq.commands import main

    capsys.readouterr()
    try:
        main(argv)
    except SystemExit as exit:
        return exit.code, *capsys.readouterr()
    return 0, *capsys.readouterr()


def default_sigint() -> None:
    """A `preexec_fn` giving the child the default SIGINT, as in a terminal: a shell that starts
    pytest in the background makes it ignore SIGINT, and its children would inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_server(*args: str) -> tuple[subprocess.Popen, str]:
    """seq2seq serve on a free loopback port; returns the process and its URL."""
    process = subprocess.Popen(
        [*SEQ2SEQ, "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = process.stdout.readline()
    if not first.startswith("serving "):
        process.kill()
        pytest.fail(f"the server did not start: {first}{process.stderr.read()}")
    return process, first.split(" on ")[-1].strip()


def stop_server(process: subprocess.Popen) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
