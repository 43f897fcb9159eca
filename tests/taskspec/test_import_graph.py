"""Imports inside evalflow.taskspec point one way: no module imports one that imports it back.

Function-level and ``TYPE_CHECKING`` imports count too: they hide a circle from the interpreter
but not from a reader, and moving one to module level would break the import.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "evalflow" / "taskspec"


def _imports(path: Path) -> set[str]:
    """The evalflow.taskspec modules ``path`` imports, wherever the import statement is."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "evalflow.taskspec":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("evalflow.taskspec."):
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[2] for a in node.names if a.name.startswith("evalflow.taskspec."))
    return found - {path.stem}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph``, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> list[str] | None:
        state[name] = 1
        for dep in sorted(graph.get(name, ())):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep] if dep in path else [name, dep]
            if dep not in state:
                found = visit(dep, path + [dep])
                if found:
                    return found
        state[name] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start, [start])
            if found:
                return found
    return None


def test_taskspec_imports_have_no_cycle() -> None:
    graph = {p.stem: _imports(p) for p in PACKAGE.glob("*.py")}
    assert "index" in graph and "groups" in graph["index"]  # the graph is read (not vacuously empty)
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
