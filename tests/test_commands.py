"""The `seq2seq` command: every stage is a subcommand with its own --help; a missing or unknown
command is one `error:` line."""

import contextlib
import io
import re
import subprocess

import pytest
from commands import SEQ2SEQ

from seq2seq.commands import COMMANDS, command_module, main
from seq2seq.commands.cli import summary as summary_of


def run_in_process(argv: list[str]) -> tuple[int | str | None, str, str]:
    """The exit status, standard output and standard error of `seq2seq ARGV`."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
            code = 0
        except SystemExit as exit:
            code = exit.code
    return code, out.getvalue(), err.getvalue()


def test_help_lists_every_command_with_its_summary() -> None:
    code, out, _ = run_in_process(["--help"])
    assert code == 0
    commands = out.split("commands:\n")[1].split("\n\n")[0]
    listed = re.findall(r"^  (\w+) +(.*(?:\n {14}.*)*)$", commands, re.MULTILINE)
    assert [name for name, _ in listed] == list(COMMANDS)
    for name, summary in listed:  # the whole first paragraph of its docstring, wrapped
        assert " ".join(summary.split()) == summary_of(command_module(name).__doc__)


@pytest.mark.parametrize("name", COMMANDS)
def test_each_command_has_its_own_help(name: str) -> None:
    code, out, _ = run_in_process([name, "--help"])
    assert code == 0
    assert out.startswith(f"usage: seq2seq {name} ")
    assert isinstance(command_module(name).TUNE, bool)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "error: no command given; commands: prepare, train, "),
        (["fly"], "unknown command 'fly'"),
    ],
)
def test_a_missing_or_unknown_command_is_one_error_line(argv: list[str], message: str) -> None:
    code, out, err = run_in_process(argv)
    assert (code, out) == (2, "")
    assert message in err and err.startswith("error: ") and err.count("\n") == 1


def test_python_m_seq2seq_is_the_same_command() -> None:
    result = subprocess.run([*SEQ2SEQ, "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    assert result.stdout == run_in_process(["--help"])[1]
