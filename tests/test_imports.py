"""Importing the library changes nothing in the process, the library imports no tool, no
import cycle joins its modules, and the index of each package (its __init__.py's docstring)
names its modules."""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import PAGES, page_faults_per_round

from seq2seq.fast.process import is_glibc

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "seq2seq"

# Imports every module of the library, noting whether os.environ changed.
IMPORT_ALL = """
import importlib, os, pkgutil
before = dict(os.environ)
import seq2seq
for module in pkgutil.walk_packages(seq2seq.__path__, "seq2seq."):
    importlib.import_module(module.name)
changed = sorted(set(os.environ.items()) ^ set(before.items()))
"""


def library_modules() -> list[str]:
    """seq2seq's modules, from its files (so that the test notices a module added later)."""
    return sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in LIBRARY.rglob("*.py")
    )


@pytest.mark.slow  # starts a Python that imports torch
def test_importing_every_module_leaves_the_environment_unchanged() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"}
    code = IMPORT_ALL + "import sys; print(changed); print(*sorted(sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    changed, imported = result.stdout.splitlines()
    assert changed == "[]"
    assert set(library_modules()) <= set(imported.split())


@pytest.mark.slow  # starts a Python that imports torch
@pytest.mark.skipif(not is_glibc(), reason="the settings are glibc's")
def test_importing_every_module_leaves_malloc_untouched(monkeypatch) -> None:
    # Untouched, glibc hands the freed blocks back and every round faults again (test_cli.py);
    # with seq2seq.fast.process.tune_process's settings, only the first round does.
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    faults = page_faults_per_round(IMPORT_ALL, dict(os.environ))
    assert min(faults) > PAGES * 9 // 10


def test_the_library_imports_no_benchmark_or_example() -> None:
    tools = {"benchmarks", "examples"} | {
        path.stem for folder in ("benchmarks", "examples") for path in (ROOT / folder).rglob("*.py")
    }
    for path in LIBRARY.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in tools, f"{path.relative_to(ROOT)} imports {name}"


def module_path(module: str) -> Path:
    """The file of `module`, a module of the library (a package's is its __init__.py)."""
    path = ROOT / Path(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def library_imports() -> dict[str, set[str]]:
    """{module: the library modules it imports}, from every import statement of its file
    (those inside functions and `if TYPE_CHECKING:` blocks included)."""
    modules = set(library_modules())
    graph: dict[str, set[str]] = {}
    for module in modules:
        imported = set()
        for node in ast.walk(ast.parse(module_path(module).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module)
                imported |= {f"{node.module}.{alias.name}" for alias in node.names}
        graph[module] = (imported & modules) - {module}
    return graph


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as the list of its modules, or None."""
    done: set[str] = set()
    for start in sorted(graph):
        path, stack = [], [(start, iter(sorted(graph[start])))]
        path.append(start)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                done.add(node)
                stack.pop()
                path.pop()
            elif child in path:
                return [*path[path.index(child) :], child]
            elif child not in done:
                path.append(child)
                stack.append((child, iter(sorted(graph[child]))))
    return None


def test_no_two_library_modules_import_each_other() -> None:
    graph = library_imports()
    assert "seq2seq.models" in graph["seq2seq.fast"]  # the graph sees package imports
    assert import_cycle(graph) is None, " -> ".join(import_cycle(graph))


def test_an_import_cycle_is_found() -> None:
    assert import_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert import_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def folder_imports(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """{subpackage: the other subpackages its modules import}, for seq2seq's folders
    (seq2seq.data, seq2seq.models, ...); the package's top-level modules belong to none."""

    def folder(module: str) -> str | None:
        parts = module.split(".")
        is_folder = len(parts) > 1 and (LIBRARY / parts[1]).is_dir()
        return ".".join(parts[:2]) if is_folder else None

    folders: dict[str, set[str]] = {}
    for module, imported in graph.items():
        if (source := folder(module)) is not None:
            targets = {folder(name) for name in imported} - {None, source}
            folders.setdefault(source, set()).update(targets)
    return folders


def two_way_pairs(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The pairs (a, b), a < b, of which each imports the other."""
    return sorted((a, b) for a in graph for b in graph[a] if a < b and a in graph.get(b, set()))


def test_no_two_library_folders_import_each_other() -> None:
    """corpus -> tokenizer -> batches -> model -> loss / search -> metrics -> serving: each
    folder imports only folders that do not import it (training imports decoding and fast,
    decoding imports fast, fast imports neither)."""
    folders = folder_imports(library_imports())
    assert {"seq2seq.training", "seq2seq.decoding", "seq2seq.fast", "seq2seq.models"} <= set(
        folders
    )
    assert "seq2seq.decoding" in folders["seq2seq.training"]  # the graph sees folder edges
    assert "seq2seq.data" in folders["seq2seq.models"]
    assert two_way_pairs(folders) == []


def test_a_two_way_pair_of_folders_is_found() -> None:
    graph = {"a": {"b.x", "c"}, "b.x": {"a"}, "c": set()}
    assert two_way_pairs(graph) == [("a", "b.x")]
    assert two_way_pairs({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == []  # a cycle, not a pair
    modules = {
        "seq2seq.fast.loss": {"seq2seq.training.loss"},
        "seq2seq.training.run": {"seq2seq.fast"},
    }
    assert folder_imports(modules) == {
        "seq2seq.fast": {"seq2seq.training"},
        "seq2seq.training": {"seq2seq.fast"},
    }
    assert two_way_pairs(folder_imports(modules)) == [("seq2seq.fast", "seq2seq.training")]


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules `start` imports, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for child in graph[todo.pop()] - seen:
            seen.add(child)
            todo.append(child)
    return seen


def test_reading_a_prepared_folder_imports_no_writer() -> None:
    imported = reachable(library_imports(), "seq2seq.data.prepared_corpus")
    assert "seq2seq.data.manifest" in imported
    assert not imported & {"seq2seq.data.prepare", "seq2seq.data.download"}


def test_the_models_import_no_later_stage_of_the_data_flow() -> None:
    """corpus -> tokenizer -> batches -> model -> loss/search -> metrics -> serving: what comes
    after the model (training's loss, decoding's search and int8 copy) takes the model as an
    argument, and no model module reaches it, directly or through another module."""
    graph = library_imports()
    later = ("seq2seq.training", "seq2seq.decoding", "seq2seq.serving")
    models = [module for module in graph if module.split(".")[:2] == ["seq2seq", "models"]]
    assert "seq2seq.models.base" in models and "seq2seq.models.transformer" in models
    for module in models:
        reached = sorted(m for m in reachable(graph, module) if m.startswith(later))
        assert reached == [], f"{module} imports {reached}"


def defined_names(module: str) -> set[str]:
    """The names `module` defines at its top level (def, class, assignment; in its top-level
    `if` and `try` blocks too), the names its `__all__` declares, and its submodules. A name it
    only imports is not among them."""
    names = {
        name.rpartition(".")[2] for name in library_modules() if name.rpartition(".")[0] == module
    }
    statements: list[ast.AST] = list(
        ast.parse(module_path(module).read_text(encoding="utf-8")).body
    )
    while statements:
        statement = statements.pop()
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(statement.name)
        elif isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names |= {
                node.id
                for target in targets
                for node in ast.walk(target)
                if isinstance(node, ast.Name)
            }
            if any(isinstance(target, ast.Name) and target.id == "__all__" for target in targets):
                names |= set(ast.literal_eval(statement.value))
        elif isinstance(statement, (ast.If, ast.Try, ast.ExceptHandler)):
            for block in ("body", "orelse", "handlers", "finalbody"):
                statements += getattr(statement, block, [])
    return names


def test_every_name_is_imported_from_the_module_that_defines_it() -> None:
    """`from seq2seq.X import name`, in the library, its tests and tools, takes a name X defines
    (or declares in `__all__`), never one X itself imports: a reader who opens X finds it."""
    assert "gnmt_penalty" not in defined_names("seq2seq.decoding.search")  # it only imports it
    assert {"GRUSeq2Seq", "build_model", "gru"} <= defined_names("seq2seq.models")
    modules = set(library_modules())
    files = [
        path
        for folder in ("seq2seq", "tests", "benchmarks", "examples", "scripts")
        for path in sorted((ROOT / folder).rglob("*.py"))
    ]
    defined = {module: defined_names(module) for module in modules}
    wrong = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules:
                missing = {alias.name for alias in node.names} - defined[node.module]
                wrong += [
                    f"{path.relative_to(ROOT)}:{node.lineno}: {node.module}.{name}"
                    for name in sorted(missing)
                ]
    assert wrong == []


# A package's index is the docstring of its __init__.py. It names a module by its file name,
# `name.py`, and a folder by `name/`; a path (seq2seq/commands/serve.py, docs/api.md) or a
# dotted name (seq2seq.decoding.search) is a reference, not an entry of the index.
INDEX_ENTRY = re.compile(r"(?<![\w/.])(\w+)(\.py|/)(?![\w/])")


def index_errors(package: Path, root: Path = ROOT) -> list[str]:
    """What the index of `package` (a folder with an __init__.py, under `root`) gets wrong: a
    module or subpackage of the package that it does not name, and a file or folder it names
    that the package does not hold."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    named = {name + kind for name, kind in INDEX_ENTRY.findall(doc or "")}
    held = {path.name for path in package.glob("*.py") if path.name != "__init__.py"} | {
        f"{path.name}/" for path in package.iterdir() if (path / "__init__.py").is_file()
    }
    folders = {f"{path.name}/" for path in package.iterdir() if path.is_dir()}
    where = (package / "__init__.py").relative_to(root)
    missing = [f"{where} does not name {name}" for name in sorted(held - named)]
    invented = [
        f"{where} names {name}, which does not exist" for name in sorted(named - held - folders)
    ]
    return missing + invented


def test_every_package_index_names_its_modules_and_nothing_else() -> None:
    packages = [LIBRARY, *sorted(path.parent for path in LIBRARY.glob("*/__init__.py"))]
    assert len(packages) == 8
    assert [error for package in packages for error in index_errors(package)] == []


def test_an_index_that_misses_or_invents_a_module_is_found(tmp_path: Path) -> None:
    package = tmp_path / "lib" / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "static").mkdir()
    for name in ("__init__.py", "a.py", "b.py", "sub/__init__.py"):
        (package / name).write_text("")
    index = '"""The index.\n\n    a.py  one\n    main.py  gone\n    sub/  a subpackage\n"""\n'
    (package / "__init__.py").write_text(
        index + "# b.py is named in a comment only, seq2seq/b.py and lib.b are references\n"
    )
    assert index_errors(package, tmp_path) == [
        "lib/pkg/__init__.py does not name b.py",
        "lib/pkg/__init__.py names main.py, which does not exist",
    ]
    (package / "__init__.py").write_text(
        '"""a.py, b.py (b.pyc is not b.py), static/ and sub/: all there."""\n'
    )
    assert index_errors(package, tmp_path) == []
