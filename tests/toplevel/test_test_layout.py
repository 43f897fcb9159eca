"""The tests mirror the package: a folder ``tests/<room>/`` for every room of evalflow/, no test file
at ``tests/``'s root, and test modules importing no other test module: what tests share lives in
``tests/support/`` (a conftest.py holds only fixtures and hooks, which pytest hands out itself)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
SUPPORT = "tests.support"
# Folders of tests/ that are not a room of evalflow/, and why.
NOT_ROOMS = {
    "support": "what the tests share: models, runs, harnesses",
    "toplevel": "the top-level modules: errors, registry, the public API, the room order, this layout",
    "docs": "the documentation: pages, runnable snippets, the built site",
    "parity": "evalflow against lm-eval 0.4.13 itself, run by run",
    "reliability": "kills, concurrency, corrupt caches and bad input across the whole run",
    "benchmarks": "the scripts of benchmarks/",
    "images": "image tasks end to end, through every room they cross",
}
ROOT_FILES = {"__init__.py", "conftest.py"}


def rooms(package: Path) -> list[str]:
    """The rooms of ``package``: its folders that hold Python modules."""
    return sorted(p.name for p in package.iterdir() if p.is_dir() and any(p.glob("*.py")))


def room_folders_missing(package: Path, tests: Path) -> list[str]:
    """Each room with no ``tests/<room>/`` holding a test file."""
    return [room for room in rooms(package) if not any((tests / room).rglob("test_*.py"))]


def stray_folders(package: Path, tests: Path) -> list[str]:
    """Folders of ``tests/`` that mirror no room and are not a declared cross-cutting folder."""
    known = set(rooms(package)) | set(NOT_ROOMS)
    return sorted(p.name for p in tests.iterdir() if p.is_dir() and p.name not in known and p.name != "__pycache__")


def files_at_the_root(tests: Path) -> list[str]:
    return sorted(p.name for p in tests.iterdir() if p.is_file() and p.name not in ROOT_FILES)


def module_of(path: Path, root: Path) -> str:
    """``tests.scale.test_chunks`` for ``tests/scale/test_chunks.py``."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__")


def imports_of_tests(path: Path, root: Path) -> list[str]:
    """The ``tests.*`` modules ``path`` imports, wherever the statement is (relative ones resolved)."""
    module = module_of(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found += [f"{base}.{a.name}" if base in ("tests", SUPPORT) else base for a in node.names]
    return sorted({name for name in found if name == "tests" or name.startswith("tests.")})


def wrong_imports(tests: Path, root: Path) -> list[str]:
    """Each import, anywhere under ``tests/`` (or another folder of scripts, ``benchmarks/``), of a
    tests module outside ``tests/support/``."""
    wrong = []
    for path in sorted(tests.rglob("*.py")):
        for name in imports_of_tests(path, root):
            if name != SUPPORT and not name.startswith(SUPPORT + "."):
                wrong.append(f"{path.relative_to(root)} imports {name}")
    return wrong


def conftest_extras(tests: Path) -> list[str]:
    """Public names a conftest.py defines that are not a fixture or a pytest hook (helpers and
    constants belong in tests/support/, where a test can import them)."""
    extras = []
    for path in sorted(tests.rglob("conftest.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                fixture = any("fixture" in ast.unparse(d) for d in node.decorator_list)
                names = [] if fixture or node.name.startswith("pytest_") else [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
            else:
                continue
            extras += [f"{path.relative_to(tests.parent)}: {n}" for n in names if not n.startswith("_")]
    return extras


def test_every_room_has_its_tests_folder_and_every_folder_is_a_room_or_says_why() -> None:
    assert "stages" in rooms(ROOT / "evalflow") and "run" in rooms(ROOT / "evalflow")
    assert room_folders_missing(ROOT / "evalflow", TESTS) == []
    assert stray_folders(ROOT / "evalflow", TESTS) == []


def test_no_test_file_at_the_root_of_tests() -> None:
    assert files_at_the_root(TESTS) == []


def test_test_modules_import_only_tests_support() -> None:
    assert wrong_imports(TESTS, ROOT) == []


def test_benchmarks_import_only_tests_support() -> None:
    assert wrong_imports(ROOT / "benchmarks", ROOT) == []


def test_conftest_files_define_only_fixtures_and_hooks() -> None:
    assert conftest_extras(TESTS) == []


def test_the_checks_fail_on_a_tree_that_breaks_each_rule(tmp_path: Path) -> None:
    package, tests = tmp_path / "evalflow", tmp_path / "tests"
    for folder in (package / "dag", package / "newroom", tests / "dag", tests / "support", tests / "misc"):
        folder.mkdir(parents=True)
    (package / "dag" / "runner.py").write_text("")
    (package / "newroom" / "thing.py").write_text("")
    (tests / "test_loose.py").write_text("")
    (tests / "support" / "runs.py").write_text("")
    (tests / "dag" / "test_keys.py").write_text("from tests.support.runs import x\nfrom tests.dag import test_other\n")
    (tests / "dag" / "test_other.py").write_text("def f():\n    from .test_keys import BASE\n    import tests.dag.x\n")
    (tests / "dag" / "conftest.py").write_text(
        "import pytest\nHELPER = 1\n_private = 2\n@pytest.fixture\ndef made(): ...\ndef build(): ...\n"
    )
    assert room_folders_missing(package, tests) == ["newroom"]
    assert stray_folders(package, tests) == ["misc"]
    assert files_at_the_root(tests) == ["test_loose.py"]
    assert wrong_imports(tests, tmp_path) == [
        "tests/dag/test_keys.py imports tests.dag",
        "tests/dag/test_other.py imports tests.dag.test_keys",
        "tests/dag/test_other.py imports tests.dag.x",
    ]
    assert conftest_extras(tests) == ["tests/dag/conftest.py: HELPER", "tests/dag/conftest.py: build"]
