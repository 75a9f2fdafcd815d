"""No function or method of the library is over MAX_LINES lines long, from its `def` line to its
last (its docstring included): a longer one is split along its natural parts."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 80


def long_functions(path: Path, root: Path = ROOT) -> list[str]:
    """`file:line name (N lines)` for every function and method of the file at `path` longer
    than MAX_LINES lines, from its `def` line to its last line (nested functions included)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_LINES:
                where = path.relative_to(root)
                found.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_library_function_is_over_80_lines() -> None:
    paths = sorted((ROOT / "seq2seq").rglob("*.py"))
    assert len(paths) > 80
    assert [found for path in paths for found in long_functions(path)] == []


def statements(count: int, indent: str) -> str:
    return "".join(f"{indent}x{i} = {i}\n" for i in range(count))


def test_a_long_function_or_method_is_found(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "def fits():\n"  # line 1, 80 lines
        + statements(79, "    ")
        + "async def long():\n"  # line 81, 81 lines
        + statements(80, "    ")
        + "class A:\n    def method(self):\n"  # line 163, 82 lines
        + statements(81, "        ")
    )
    assert long_functions(tmp_path / "m.py", tmp_path) == [
        "m.py:81 long (81 lines)",
        "m.py:163 method (82 lines)",
    ]
