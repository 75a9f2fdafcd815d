"""The `seq2seq` command as tests start it: `python -m seq2seq`, the installed command's code."""

import contextlib
import io
import signal
import subprocess
import sys

import pytest

SEQ2SEQ = [sys.executable, "-m", "seq2seq"]


def run_in_process(argv: list[str], stdin: str = "") -> subprocess.CompletedProcess:
    """`seq2seq ARGV` run in this process, with sys.argv, stdin and the standard streams as a
    process would have them: its exit status, standard output and standard error. Starting a
    Python that imports torch would take seconds, and `seq2seq.commands.main` is all that
    `python -m seq2seq` runs."""
    from seq2seq.commands import main

    saved = sys.argv, sys.stdin
    sys.argv = ["seq2seq", *argv]
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8")
    stdout, stderr, status = io.StringIO(), io.StringIO(), 0
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            main(argv)
    except SystemExit as exit:
        status = exit.code
    finally:
        sys.argv, sys.stdin = saved
    return subprocess.CompletedProcess(argv, status, stdout.getvalue(), stderr.getvalue())


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
