"""evalflow's import graph, read from the source (every import statement, wherever it is), and the
room order docs/architecture.md declares: what tests/toplevel/test_room_order.py checks, and what
other tests ask of one module's imports."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "evalflow"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
TOP_LEVEL_MODULES = {"__init__", "__main__", "errors", "registry"}


def declared_rooms(text: str, name: str = "") -> tuple[str, ...]:
    """The rooms of the ``<!-- rooms[: name] -->`` list in ``text``, bottom first."""
    marker = f"<!-- rooms: {name} -->" if name else "<!-- rooms -->"
    block = text.split(marker, 1)[1].split("<!-- /rooms -->", 1)[0]
    return tuple(re.findall(r"^\d+\. `([\w.]+)`", block, flags=re.M))


def module_name(path: Path) -> str:
    """``evalflow.config.schema`` for ``evalflow/config/schema.py``."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__")


def imports_of(path: Path, module: str, modules: set[str]) -> set[str]:
    """The evalflow modules ``path`` imports, wherever the statement is (relative imports resolved)."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            subs = {f"{base}.{a.name}" for a in node.names} & modules
            found.update(subs if len(subs) == len(node.names) else subs | {base})
    return (found & modules) - {module}


def import_graph() -> dict[str, set[str]]:
    """``{module: the evalflow modules it imports}`` for every module of the package."""
    paths = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    modules = set(paths)
    return {m: imports_of(p, m, modules) for m, p in paths.items()}


def room_of(module: str, prefix: str = "evalflow") -> str:
    """The room a module lives in: its package below ``prefix``, or the module itself at the top."""
    rest = module[len(prefix) :].lstrip(".").split(".")
    return rest[0] if rest[0] else prefix.rpartition(".")[2]


def against_the_order(graph: dict[str, set[str]], rooms: tuple[str, ...], prefix: str) -> list[str]:
    """Every import among ``prefix``'s modules that climbs ``rooms``' order, as ``importer -> imported``,
    and every module whose room ``rooms`` does not declare."""
    rank = {room: i for i, room in enumerate(rooms)}
    inside = {m: deps for m, deps in graph.items() if m == prefix or m.startswith(prefix + ".")}
    wrong = [f"{m}: room {room_of(m, prefix)!r} is not declared" for m in inside if room_of(m, prefix) not in rank]
    for module, deps in sorted(inside.items()):
        for dep in sorted(d for d in deps if d in inside):
            here, there = rank.get(room_of(module, prefix), -1), rank.get(room_of(dep, prefix), len(rooms))
            if there > here:
                wrong.append(f"{module} -> {dep}")
    return sorted(wrong)


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph``, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> list[str] | None:
        state[name] = 1
        for dep in sorted(graph.get(name, ())):
            if state.get(dep) == 1:
                return path[path.index(dep) :] + [dep]
            if dep not in state and (found := visit(dep, [*path, dep])):
                return found
        state[name] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return None
