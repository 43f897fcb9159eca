"""Imports point one way: down the rooms docs/architecture.md declares, and never in a circle.

The order is written once, in docs/architecture.md's "Room order" lists; this test reads them. A
module may import its own room and the rooms below; function-level and ``TYPE_CHECKING`` imports
count too (they hide a circle from the interpreter, not from a reader). Inside ``taskspec`` the
subpackages are rooms of their own, in a second list.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.import_graph import (
    ARCHITECTURE,
    PACKAGE,
    TOP_LEVEL_MODULES,
    against_the_order,
    cycle,
    declared_rooms,
    import_graph,
    imports_of,
)


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
