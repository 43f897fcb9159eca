"""Imports point one way: down the rooms docs/architecture.md declares, and never in a circle.

The order is written once, in docs/architecture.md's "Room order" lists; this test reads them. A
module may import its own room and the rooms below; function-level and ``TYPE_CHECKING`` imports
count too (they hide a circle from the interpreter, not from a reader). Inside ``taskspec`` the
subpackages are rooms of their own, in a second list.
"""

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


def test_every_room_is_declared_and_there_are_at_most_24() -> None:
    rooms = declared_rooms(ARCHITECTURE.read_text())
    on_disk = {p.parent.name for p in PACKAGE.glob("*/*.py")} | {p.stem for p in PACKAGE.glob("*.py")}
    on_disk = (on_disk - {"__init__"}) | {"evalflow"}
    assert set(rooms) == on_disk, f"declared {sorted(rooms)}, on disk {sorted(on_disk)}"
    assert len(rooms) <= 24


def test_the_top_level_holds_only_the_api_main_errors_and_registry() -> None:
    assert {p.stem for p in PACKAGE.glob("*.py")} == TOP_LEVEL_MODULES


def test_imports_go_down_the_rooms() -> None:
    graph = import_graph()
    assert "evalflow.cache.store" in graph["evalflow.dag.runner"]  # the graph is read, not vacuously empty
    assert against_the_order(graph, declared_rooms(ARCHITECTURE.read_text()), "evalflow") == []


def test_taskspec_imports_go_down_its_rooms() -> None:
    rooms = declared_rooms(ARCHITECTURE.read_text(), "taskspec") + ("taskspec",)  # its top imports any room
    on_disk = {p.parent.name for p in (PACKAGE / "taskspec").glob("*/*.py")}
    assert set(rooms) - {"taskspec"} == on_disk
    assert against_the_order(import_graph(), rooms, "evalflow.taskspec") == []


def test_no_module_imports_itself_in_a_circle() -> None:
    graph = import_graph()
    assert cycle(graph) is None, " -> ".join(cycle(graph) or [])


def test_the_order_checker_finds_a_climb_and_an_undeclared_room() -> None:
    graph = {
        "evalflow.cache.store": {"evalflow.dag.runner"},
        "evalflow.dag.runner": {"evalflow.cache.store"},
        "evalflow.extra.x": set(),
    }
    assert against_the_order(graph, ("cache", "dag"), "evalflow") == [
        "evalflow.cache.store -> evalflow.dag.runner",
        "evalflow.extra.x: room 'extra' is not declared",
    ]
    assert cycle(graph) == ["evalflow.cache.store", "evalflow.dag.runner", "evalflow.cache.store"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_the_import_reader_sees_lazy_relative_and_package_imports(tmp_path: Path) -> None:
    file = tmp_path / "m.py"
    file.write_text(
        "from evalflow.taskspec.format import spec\n"
        "def f():\n    from evalflow.cache.store import CacheStore\n"
        "import evalflow.dag.runner\nfrom .. import errors\n"
    )
    modules = {"evalflow.taskspec.format", "evalflow.taskspec.format.spec", "evalflow.cache.store"}
    modules |= {"evalflow.dag.runner", "evalflow.errors", "evalflow.x.m"}
    assert imports_of(file, "evalflow.x.m", modules) == modules - {"evalflow.taskspec.format", "evalflow.x.m"}


def test_every_room_says_what_lives_there_and_what_it_may_import() -> None:
    rooms = sorted({p.parent for p in PACKAGE.glob("*/*.py")})
    silent = [room.name for room in rooms if "May import" not in _docstring(room / "__init__.py")]
    assert silent == [], f"rooms whose __init__.py does not say what it may import: {silent}"


def _docstring(path: Path) -> str:
    return (ast.get_docstring(ast.parse(path.read_text())) or "") if path.exists() else ""
