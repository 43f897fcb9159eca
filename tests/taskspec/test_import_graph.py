"""Imports inside evalflow.taskspec point one way: down the rooms, and never in a circle.

The subpackages are rooms in a declared order (:data:`ROOMS`, lowest first); a module may import
its own room and the rooms below it, never one above. Between modules there is no cycle either.
Function-level and ``TYPE_CHECKING`` imports count too: they hide a circle from the interpreter
but not from a reader, and moving one to module level would break the import.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "evalflow" / "taskspec"
PREFIX = "evalflow.taskspec"

ROOMS: tuple[str, ...] = ("sidenv", "format", "prompts", "data", "catalog")
"""Lowest first: side environments run task code, the format names it, prompts render documents
(templates call task code), data loads them (``process_docs``, ``doc_to_image``), the catalog
indexes and selects tasks. A module at the package's top (a command-line entry point) may import
any room; no room imports it."""


def _module_name(path: Path) -> str:
    """``evalflow.taskspec.format.spec`` for ``.../taskspec/format/spec.py``."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join((PREFIX,) + tuple(p for p in parts if p != "__init__"))


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The evalflow.taskspec modules ``path`` imports, wherever the import statement is."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(PREFIX + "."))
    return {name for name in found if name in modules}


def import_graph() -> dict[str, set[str]]:
    """``{module: the taskspec modules it imports}`` for every module of the package."""
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    return {_module_name(p): _imports(p, modules) - {_module_name(p)} for p in paths}


SUBPACKAGES = frozenset(p.parent.name for p in PACKAGE.glob("*/__init__.py"))


def room_of(module: str) -> str | None:
    """The room (subpackage) a module lives in, or None for one at the package's top."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[2] in SUBPACKAGES else None


def upward_imports(graph: dict[str, set[str]], rooms: tuple[str, ...]) -> list[str]:
    """Every import that goes against ``rooms``' order, as ``importer -> imported``: into a room
    above the importer's, into a module at the top, or from a room ``rooms`` does not declare."""
    rank = {room: i for i, room in enumerate(rooms)}
    wrong: list[str] = []
    for module, deps in sorted(graph.items()):
        room = room_of(module)
        if room is None:
            continue  # the top imports any room
        for dep in sorted(deps):
            dep_room = room_of(dep)
            if room not in rank or dep_room is None or dep_room not in rank or rank[dep_room] > rank[room]:
                wrong.append(f"{module} -> {dep}")
    return wrong


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph``, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> list[str] | None:
        state[name] = 1
        for dep in sorted(graph.get(name, ())):
            if state.get(dep) == 1:
                return path[path.index(dep) :] + [dep] if dep in path else [name, dep]
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


def test_every_module_lives_in_a_declared_room() -> None:
    graph = import_graph()
    assert set(ROOMS) == SUBPACKAGES, (
        f"rooms on disk {sorted(SUBPACKAGES)}; declared {list(ROOMS)}: add the new one to ROOMS"
    )
    assert {room_of(m) for m in graph} == set(ROOMS) | {None}


def test_taskspec_imports_go_down_the_rooms() -> None:
    graph = import_graph()
    assert f"{PREFIX}.catalog.groups" in graph[f"{PREFIX}.catalog.index"]  # the graph is read (not vacuously empty)
    assert upward_imports(graph, ROOMS) == []


def test_taskspec_imports_have_no_cycle() -> None:
    graph = import_graph()
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_room_checker_finds_an_upward_import() -> None:
    graph = {
        f"{PREFIX}.format.spec": {f"{PREFIX}.sidenv.envs"},
        f"{PREFIX}.sidenv.worker": {f"{PREFIX}.sidenv.envs", f"{PREFIX}.format.spec"},
        f"{PREFIX}.sidenv.envs": {f"{PREFIX}.cli"},
        f"{PREFIX}.cli": {f"{PREFIX}.format.spec"},
    }
    assert upward_imports(graph, ("sidenv", "format")) == [
        f"{PREFIX}.sidenv.envs -> {PREFIX}.cli",
        f"{PREFIX}.sidenv.worker -> {PREFIX}.format.spec",
    ]
    assert upward_imports(graph, ("sidenv",)) == [
        f"{PREFIX}.format.spec -> {PREFIX}.sidenv.envs",
        f"{PREFIX}.sidenv.envs -> {PREFIX}.cli",
        f"{PREFIX}.sidenv.worker -> {PREFIX}.format.spec",
    ]


def test_import_reader_sees_lazy_and_package_imports(tmp_path: Path) -> None:
    file = tmp_path / "m.py"
    file.write_text(
        "from evalflow.taskspec.format import spec\n"
        "def f():\n    from evalflow.taskspec.sidenv.envs import SideEnv\n"
        "import evalflow.taskspec.catalog.index\n"
    )
    modules = {f"{PREFIX}.format", f"{PREFIX}.format.spec", f"{PREFIX}.sidenv.envs", f"{PREFIX}.catalog.index"}
    assert _imports(file, modules) == modules


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
