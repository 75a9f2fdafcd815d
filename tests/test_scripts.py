"""The scripts of scripts/ (each the same code as a `seq2seq` command), and what a newcomer meets
first: the shipped models listed in `seq2seq translate --help`, `seq2seq train` asking for a
configuration, the build folders git ignores."""

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from commands import SEQ2SEQ, run_in_process

from seq2seq.commands import COMMANDS, translate
from seq2seq.commands import train as train_command
from seq2seq.decoding.model_result import SHIPPED_MODELS, shipped_model_names

ROOT = Path(__file__).resolve().parents[1]
# Each script of scripts/ and the `seq2seq` command it runs.
SCRIPTS = {
    "prepare_data": "prepare",
    "train": "train",
    "translate": "translate",
    "evaluate": "evaluate",
    "align": "align",
    "average_checkpoints": "average",
    "export": "export",
    "serve": "serve",
    "explore": "explore",
}
# As when the virtual environment is active: its python3 first on PATH, the scripts run by path.
ENV = {
    **os.environ,
    "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    "COLUMNS": "100",
}
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
SHIPPED = "transformer-tiny.multi30k.en-de"
LINES = "A little girl is playing in the park.\nTwo dogs run on the beach.\n"


def script(name: str) -> str:
    return f"scripts/{name}.py"


def test_every_script_runs_its_command():
    """One script per command, executable, and nothing in it but the call of that command."""
    assert sorted(path.stem for path in (ROOT / "scripts").glob("*.py")) == sorted(SCRIPTS)
    assert set(SCRIPTS.values()) == set(COMMANDS)
    for name, command in SCRIPTS.items():
        path = ROOT / script(name)
        text = path.read_text(encoding="utf-8")
        assert os.access(path, os.X_OK), path
        assert text.startswith("#!/usr/bin/env python3\n"), path
        assert text.endswith(
            f'if __name__ == "__main__":\n    main(["{command}", *sys.argv[1:]])\n'
        ), path
        assert f"`seq2seq {command}`" in text, path


def help_text(command: list[str]) -> str:
    result = subprocess.run(
        [*command, "--help"], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{command} --help:\n{result.stderr}"
    return result.stdout


@pytest.mark.slow  # each script imports torch
def test_script_help_names_the_script_and_its_options():
    commands = [[script(name)] for name in SCRIPTS] + [[*SEQ2SEQ, c] for c in SCRIPTS.values()]
    with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:  # one process per core
        texts = list(pool.map(help_text, commands))
    for (name, command), script_help, command_help in zip(
        SCRIPTS.items(), texts[: len(SCRIPTS)], texts[len(SCRIPTS) :], strict=True
    ):
        assert script_help.startswith(f"usage: {script(name)} "), script_help
        assert command_help.startswith(f"usage: seq2seq {command} "), command_help
        options = OPTION.findall(command_help)
        assert "--help" in options and len(options) > 2, command_help
        assert OPTION.findall(script_help) == options, name


@pytest.mark.slow  # a process that imports torch, and decoding
def test_translate_script_equals_the_command():
    options = ["--model", SHIPPED, "--beam", "3", "--nbest", "2"]
    by_script = subprocess.run(
        [script("translate"), *options],
        input=LINES,
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    by_command = run_in_process(["translate", *options], LINES)  # the script: a real process
    assert by_script.returncode == by_command.returncode == 0, by_script.stderr
    lines = by_script.stdout.splitlines()
    assert [line.split(" ||| ")[0] for line in lines] == ["0", "0", "1", "1"], lines
    assert by_script.stdout == by_command.stdout


@pytest.mark.slow  # a process that imports torch
def test_a_bad_script_option_is_one_error_line():
    result = subprocess.run(
        [script("translate"), "--model", SHIPPED, "--beam", "0"],
        input="",
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: argument --beam: 0: "), result.stderr
    assert result.stderr.endswith(" (see scripts/translate.py --help)\n"), result.stderr


def test_translate_help_lists_the_shipped_models(capsys):
    names = shipped_model_names()
    assert names == sorted(path.name for path in SHIPPED_MODELS.iterdir() if path.is_dir())
    assert SHIPPED in names and len(names) == 5
    with pytest.raises(SystemExit) as stopped:
        translate.parse_args(["--help"])
    assert stopped.value.code == 0
    help_text = capsys.readouterr().out
    listed = help_text.split("shipped models (--model NAME):\n")[1]
    assert listed.splitlines() == [f"  {name}" for name in names]


def test_train_without_config_names_the_committed_configs(capsys):
    with pytest.raises(SystemExit) as stopped:
        train_command.main(["train.lr=1e-3"])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    configs = sorted(f"configs/{path.name}" for path in (ROOT / "configs").glob("*.toml"))
    assert "configs/transformer.multi30k.en-de.toml" in configs
    assert error == (
        f"error: --config FILE is required: {', '.join(configs)} or your own "
        "(see seq2seq train --help)\n"
    )


def test_git_ignores_build_folders_and_keeps_the_shipped_models():
    def ignored(path: str) -> bool:
        check = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT)
        assert check.returncode in (0, 1)
        return check.returncode == 0

    assert ignored("build/lib/seq2seq/api.py")
    assert ignored("dist/seq2seq-0.1.0.tar.gz")
    assert not ignored("seq2seq/shipped_models/transformer-tiny.multi30k.en-de/sentencepiece.model")
    assert not ignored("scripts/build/notes.txt")  # only the top-level build/


def make_train_config(*variables: str) -> str:
    """The --config of the command that `make -n train` prints with `variables`."""
    command = ["make", "-n", "-o", ".venv/.installed", "train", *variables]
    dry_run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    return dry_run.stdout.split("--config ")[1].split()[0]


@pytest.mark.parametrize(
    ("variables", "config"),
    [
        (["CUDA=0"], "configs/transformer.multi30k.en-de.cpu.toml"),
        (["CUDA=1"], "configs/transformer.multi30k.en-de.toml"),
        (["CUDA=0", "MODEL=gru"], "configs/gru.multi30k.en-de.toml"),  # no CPU recipe of its own
        (["CUDA=0", "CONFIG=configs/gru.multi30k.en-de.toml"], "configs/gru.multi30k.en-de.toml"),
    ],
)
def test_make_train_picks_the_cpu_recipe_without_a_cuda_gpu(variables, config):
    assert make_train_config(*variables) == config


@pytest.mark.slow  # starts a Python that imports torch
def test_make_train_asks_torch_for_a_cuda_gpu():
    import torch

    cpu = not torch.cuda.is_available()
    assert make_train_config() == make_train_config(f"CUDA={int(not cpu)}")
