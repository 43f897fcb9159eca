"""Which task-code files a task module imports: its siblings, relative imports and the modules of
the package it lives in, read from ``import`` statements with ``ast`` (nothing is executed).

Two questions need the answer. A side environment is chosen by what any of these files import
(:mod:`evalflow.taskspec.sidenv.envs`). And a loose ``!function`` module's cache identity must cover them: a
``utils.py`` that imports ``helpers.py`` computes what ``helpers.py`` says, so editing it must miss
the cache (:func:`evalflow.taskspec.format.installed.code_fingerprint`). The closure is the imported
files, not every ``.py`` in the folder: a task folder is often an ``include_path`` root that holds
many tasks' modules, and an edit to one task's helper should re-score that task only.

    >>> local_closure(Path(__file__))[0] == Path(__file__).resolve()
    True
"""

from __future__ import annotations

import ast
import functools
import os
import warnings
from pathlib import Path

from evalflow.cache.code import all_statements

__all__ = ["imported_names", "local_closure", "local_module"]


def local_closure(path: str | os.PathLike[str]) -> tuple[Path, ...]:
    """``path`` (resolved) first, then every task-code file it imports, transitively, sorted.

    Each file's imports are parsed once per version (memoized by its stat), so asking again after
    an edit sees a new ``import`` at once; a file that does not parse contributes itself only.
    """
    start = Path(path).resolve()
    seen: set[Path] = set()
    todo = [start]
    while todo:
        current = todo.pop()
        if current in seen or not current.is_file():
            continue
        seen.add(current)
        stat = current.stat()
        names = imported_names(current, stat.st_mtime_ns, stat.st_size)
        todo.extend(m for m in (local_module(current.parent, n) for n in names) if m is not None)
    return (start, *sorted(seen - {start}))


@functools.lru_cache(maxsize=8192)
def imported_names(path: Path, mtime_ns: int, size: int) -> tuple[str, ...]:
    """The module names one file imports (memoized by its stat: many task modules share helpers);
    a relative import keeps its leading dots (``.helpers``)."""
    try:
        with warnings.catch_warnings():  # invalid escapes in old task code: the import will warn
            warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))
            tree = ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):  # the import itself will report it
        return ()
    names: list[str] = []
    for node in all_statements(tree.body):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names.append(base)
            names.extend(f"{base}.{a.name}" if base.strip(".") else base + a.name for a in node.names if a.name != "*")
    return tuple(dict.fromkeys(names))


@functools.lru_cache(maxsize=65536)
def local_module(folder: Path, name: str) -> Path | None:
    """The task-code file ``name`` refers to from a module in ``folder``, if it is one."""
    stripped = name.lstrip(".")
    level = len(name) - len(stripped)
    parts = [p for p in stripped.split(".") if p]
    if not parts:
        return None
    if level:
        base = folder.parents[level - 2] if level > 1 else folder
        return _as_file(base, parts)
    for parent in (folder, *folder.parents):  # a sibling, or a package the module lives in
        if parent != folder and not folder.is_relative_to(parent / parts[0]):
            continue  # another installed package (sympy, datasets): not task code
        found = _as_file(parent, parts)
        if found is not None:
            return found
    return None


def _as_file(base: Path, parts: list[str]) -> Path | None:
    if not parts:
        return None
    for candidate in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate.resolve()
    return None
