"""The README and docs/ say only what is true of the repository: every command shown runs.

Checked in README.md and docs/*.md: the README's length; every path under scripts/,
benchmarks/, examples/, seq2seq/ and configs/ exists; every `--option` given to a `seq2seq`
command or a script (of scripts/, benchmarks/ or examples/) is in its `--help`; every `make`
target exists (these three also inside the generated
sections between `<!-- NAME:start -->` and `<!-- NAME:end -->`, whose commands say how to
reproduce a recorded run); every relative link and image points to a file (and heading) that
exists; every name the maths-to-code map gives after a `seq2seq/...py` file is defined in that
file (these two outside the generated sections).
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from seq2seq.commands import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250

GENERATED = re.compile(r"<!-- (\w+):start -->.*?<!-- \1:end -->", re.DOTALL)
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
PATH = re.compile(r"(?<![\w./-])((?:scripts|benchmarks|examples|seq2seq|configs)/[\w./*-]*\w)")
SCRIPT = re.compile(
    r"(?<![\w./-])((?:scripts|benchmarks|examples)/[\w/-]+\.py)\b"
    rf"|(?<![\w.-])(seq2seq (?:{'|'.join(COMMANDS)}))\b"
)
# Each script of scripts/ runs a `seq2seq` command (tests/test_scripts.py checks that their
# options are the same): {"scripts/translate.py": "seq2seq translate"}.
SCRIPT_COMMANDS = {
    f"scripts/{path.name}": f"seq2seq {found.group(1)}"
    for path in (ROOT / "scripts").glob("*.py")
    if (found := re.search(r'main\(\["(\w+)"', path.read_text(encoding="utf-8")))
}
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
MAKE = re.compile(r"(?<![\w./-])make ([a-z][\w-]*)\b(.*)")
MAKE_ARGS = re.compile(r"""ARGS=(["'])(.*?)\1""")
COMMAND_END = re.compile(r"\s(?:\||;|&&|<|>|#)\s?")
MAP_ENTRY = re.compile(r"`(seq2seq/[\w/]+\.py)`: (.*?)(?=`seq2seq/|\||;|\.\s|\.$|$)")
NAME = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)`")


def prose(path: Path) -> str:
    """The file's text without its generated sections."""
    return GENERATED.sub("", path.read_text(encoding="utf-8"))


def code_texts(text: str) -> list[str]:
    """Commands and code: fenced blocks, indented blocks (continuation lines joined) and code
    spans, one string per line or span."""
    texts = [line for block in FENCE.findall(text) for line in block.splitlines()[1:-1]]
    text = FENCE.sub("", text)
    lines = text.replace("\\\n", " ").splitlines()
    texts += [line.strip() for line in lines if line.startswith("    ") and line.strip()]
    texts += CODE_SPAN.findall(text)
    return texts


def without_comment(command: str) -> str:
    return re.split(r"\s#\s", command, maxsplit=1)[0]


def script_name(match: re.Match[str]) -> str:
    """The script or `seq2seq` command that SCRIPT matched; a script of scripts/ as the command
    it runs."""
    script = match.group(1) or match.group(2)
    return SCRIPT_COMMANDS.get(script, script)


def scripts_in(text: str) -> list[str]:
    """The scripts (`benchmarks/bench.py`) and `seq2seq` commands (`seq2seq train`, also as
    `scripts/train.py`) in `text`."""
    return [script_name(match) for match in SCRIPT.finditer(text)]


def script_options(command: str) -> list[tuple[str, str]]:
    """(script, --option) for every option given to a script or `seq2seq` command in `command`:
    the options after it, up to the command's end (|, ;, &&, <, >) or the next script."""
    pairs = []
    matches = list(SCRIPT.finditer(command))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(command)
        arguments = COMMAND_END.split(command[match.end() : end], maxsplit=1)[0]
        script = script_name(match)
        pairs += [(script, option) for option in OPTION.findall(arguments)]
    return pairs


def shown_exists(script: str) -> bool:
    """Whether a script or `seq2seq` command named in the docs exists (its --help is read)."""
    return (
        script.split()[1] in COMMANDS
        if script.startswith("seq2seq ")
        else (ROOT / script).is_file()
    )


# The `--help` of each script or `seq2seq` command named in argv, as {name: [exit status, output,
# errors]}: each runs as `python SCRIPT --help` would (its folder first on sys.path), all in one
# Python, which imports torch once where a Python per script took seconds each.
HELPS = """
import contextlib, io, json, runpy, sys
from pathlib import Path
from seq2seq.commands import main
helps, first = {}, sys.path[0]
for script in sys.argv[1:]:
    out, err, status = io.StringIO(), io.StringIO(), 0
    sys.argv, sys.path[0] = [script, "--help"], str(Path(script).resolve().parent)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            if script.startswith("seq2seq "):
                main([script.split()[1], "--help"])
            else:
                runpy.run_path(script, run_name="__main__")
    except SystemExit as exit:
        status = exit.code
    sys.path[0] = first
    helps[script] = [status, out.getvalue(), err.getvalue()]
print(json.dumps(helps))
"""


def makefile_targets() -> dict[str, str]:
    """{target: its recipe} from the Makefile."""
    targets: dict[str, str] = {}
    current = None
    for line in (ROOT / "Makefile").read_text(encoding="utf-8").splitlines():
        rule = re.match(r"^([\w.-]+)\s*:(?!=)", line)
        if rule:
            current = rule.group(1)
            targets[current] = ""
        elif line.startswith("\t") and current:
            targets[current] += line + "\n"
        elif line.strip() and not line.startswith("#"):
            current = None
    return targets


def heading_anchors(path: Path) -> set[str]:
    """GitHub's anchors of the markdown file's headings."""
    anchors = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^#{1,6} (.*)", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            anchors.add(slug.replace(" ", "-"))
    return anchors


def all_code() -> list[tuple[Path, str]]:
    """Every command and code span of the docs, generated sections included."""
    texts = [(doc, text) for doc in DOCS for text in code_texts(doc.read_text(encoding="utf-8"))]
    return [(doc, without_comment(text)) for doc, text in texts]


@pytest.fixture(scope="module")
def help_texts() -> dict[str, str]:
    """Each shown script's `--help` output (HELPS, in one other Python)."""
    scripts = {script for _, text in all_code() for script, _ in script_options(text)}
    targets = makefile_targets()
    for _, text in all_code():
        for target, rest in MAKE.findall(text):
            if MAKE_ARGS.search(rest) and target in targets:
                scripts.update(scripts_in(targets[target]))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    shown = sorted(script for script in scripts if shown_exists(script))
    result = subprocess.run(
        [sys.executable, "-c", HELPS, *shown],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    helps = json.loads(result.stdout)
    for script, (status, _, errors) in helps.items():
        assert status in (0, None), f"{script} --help failed:\n{errors}"
    return {script: output for script, (_, output, _) in helps.items()}


def test_docs_are_found():
    assert (ROOT / "README.md") in DOCS and len(DOCS) >= 7, DOCS


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES})"


def test_shown_paths_exist():
    missing = set()
    for doc, text in all_code():
        for path in PATH.findall(text):
            found = list(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()
            if not found:
                missing.add(f"{doc.relative_to(ROOT)}: {path}")
    assert not missing, "\n".join(sorted(missing))


@pytest.mark.slow  # starts a process per command shown
def test_shown_script_options_exist(help_texts):
    unknown = set()
    targets = makefile_targets()
    for doc, text in all_code():
        pairs = script_options(text)
        for target, rest in MAKE.findall(text):
            arguments = " ".join(value for _, value in MAKE_ARGS.findall(rest))
            for script in scripts_in(targets.get(target, "")):
                pairs += [(script, option) for option in OPTION.findall(arguments)]
        for script, option in pairs:
            if script in help_texts and option not in OPTION.findall(help_texts[script]):
                unknown.add(f"{doc.relative_to(ROOT)}: {script} {option}")
    assert not unknown, "\n".join(sorted(unknown))


def test_shown_make_targets_exist():
    targets = makefile_targets()
    missing = {
        f"{doc.relative_to(ROOT)}: make {target}"
        for doc, text in all_code()
        for target, _ in MAKE.findall(text)
        if target not in targets
    }
    assert not missing, "\n".join(sorted(missing))


def test_links_and_images_point_to_files():
    broken = []
    for doc in DOCS:
        for link in LINK.findall(prose(doc)):
            if re.match(r"^[a-z]+:", link):
                continue
            file_part, _, anchor = link.partition("#")
            target = (doc.parent / file_part).resolve() if file_part else doc
            if not target.is_file():
                broken.append(f"{doc.relative_to(ROOT)}: {link}")
            elif anchor and anchor not in heading_anchors(target):
                broken.append(f"{doc.relative_to(ROOT)}: {link} (no such heading)")
    assert not broken, "\n".join(broken)


def test_code_map_names_are_defined():
    """`seq2seq/models/attention.py`: `masked_softmax`, `MultiHeadAttention.attend` ... must be a
    function, class or method defined in that file."""
    undefined = []
    for doc in DOCS:
        for paragraph in re.split(r"\n\s*\n", prose(doc)):
            for path, names in MAP_ENTRY.findall(paragraph.replace("\n", " ")):
                file = ROOT / path
                source = file.read_text(encoding="utf-8") if file.is_file() else ""
                for name in NAME.findall(names):
                    for part in name.split("."):
                        if not re.search(rf"^\s*(?:def|class) {part}\b", source, re.MULTILINE):
                            undefined.append(f"{doc.relative_to(ROOT)}: {path}: {name}")
    assert not undefined, "\n".join(undefined)


def test_script_options_are_parsed():
    """The parser the checks above rely on."""
    command = "echo hi | .venv/bin/seq2seq translate --model m --show-attention > out --not-this"
    assert script_options(command) == [
        ("seq2seq translate", "--model"),
        ("seq2seq translate", "--show-attention"),
    ]
    assert script_options("scripts/average_checkpoints.py --last 5 run") == [
        ("seq2seq average", "--last")
    ]
    nested = 'seq2seq evaluate --record r --command "seq2seq average --last 5"'
    assert script_options(nested) == [
        ("seq2seq evaluate", "--record"),
        ("seq2seq evaluate", "--command"),
        ("seq2seq average", "--last"),
    ]
    assert code_texts("text\n\n    a \\\n        b\n\n`c --d`\n") == ["a          b", "c --d"]
