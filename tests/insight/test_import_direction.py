"""Imports between the run and the tools that read runs point one way: ``evalflow.run.phases`` may import
``evalflow.insight`` (``explain=true`` prints explain's lines), never the reverse. ``rescore`` runs
through the same parts and runner as a run (``evalflow.run.parts``, ``evalflow.dag.runner``), not
through ``app``.

Function-level imports count: they hide a circle from the interpreter but not from a reader.
"""

from __future__ import annotations

import ast
from pathlib import Path

EVALFLOW = Path(__file__).resolve().parents[2] / "evalflow"


def _module_name(path: Path) -> str:
    parts = path.relative_to(EVALFLOW.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    base = EVALFLOW.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _imports(path: Path) -> set[str]:
    """The evalflow modules ``path`` imports, wherever the import statement is."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "evalflow":
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if _is_module(f"{node.module}.{a.name}"))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "evalflow")
    return {name for name in found if _is_module(name)}


GRAPH = {_module_name(p): _imports(p) for p in EVALFLOW.rglob("*.py")}


def _reached(start: str) -> set[str]:
    """Every evalflow module ``start`` imports, transitively."""
    seen: set[str] = set()
    todo = list(GRAPH.get(start, ()))
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(GRAPH.get(name, ()))
    return seen


def test_app_imports_insight_and_insight_never_imports_app() -> None:
    assert "evalflow.insight.explanation" in GRAPH["evalflow.run.phases"]  # the one direction (and the graph is read)
    insight = sorted(m for m in GRAPH if m == "evalflow.insight" or m.startswith("evalflow.insight."))
    assert "evalflow.run.rescoring" in insight
    reaching = {m: sorted(r for r in _reached(m) if r == "evalflow.run.phases") for m in insight}
    assert not any(reaching.values()), {m: r for m, r in reaching.items() if r}


def test_rescore_runs_through_the_runs_own_parts() -> None:
    assert {"evalflow.run.parts", "evalflow.dag.runner"} <= GRAPH["evalflow.run.rescoring"]
    assert {"evalflow.run.parts", "evalflow.dag.runner"} <= GRAPH["evalflow.run.phases"]
