"""Importing a loose task-code file and its sibling files from their source as it is now, never from a ``.pyc``.

A run's keys name task code by the hash of its source (:func:`~evalflow.taskspec.format.installed.code_fingerprint`).
Python's import trusts a timestamp ``.pyc`` in ``__pycache__`` while the source's whole-second mtime
and size match what the ``.pyc`` recorded, so an edit that keeps the size (one character replaced,
``sed -i``) within the second of the last import would run the code from before the edit under
the new key: a score cached for code that never ran. Only where Python writes no bytecode
(``PYTHONDONTWRITEBYTECODE``) is that hidden, which made it pass on one machine and fail on a
fresh one. Task code is small; compiling it at each import costs little, and nothing is written
into the task's folder.

    with from_source(path):
        spec.loader.exec_module(module)  # spec from source_spec(name, path); siblings from source too
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Iterator, Sequence
from importlib.machinery import ModuleSpec
from types import CodeType, ModuleType

from evalflow.taskspec.sidenv.local_modules import local_closure


class SourceLoader(importlib.machinery.SourceFileLoader):
    """A file's loader that compiles its current source at every import (no ``.pyc`` read or written)."""

    def get_code(self, fullname: str) -> CodeType:
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


def source_spec(name: str, path: str) -> ModuleSpec | None:
    """The spec that imports ``path`` as module ``name`` through :class:`SourceLoader`."""
    return importlib.util.spec_from_file_location(name, path, loader=SourceLoader(name, path))


class _SiblingFinder:
    """Finds the task-code files ``files`` (real paths) where the import path would, and hands back
    a :class:`SourceLoader` spec for them; every other module is left to the finders after it."""

    def __init__(self, files: frozenset[str]) -> None:
        self.files = files

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        found = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if found is None or found.origin is None or os.path.realpath(found.origin) not in self.files:
            return None
        return source_spec(found.name, found.origin)


@contextlib.contextmanager
def from_source(path: str) -> Iterator[None]:
    """While the block runs, the task-code files ``path`` imports (``from .helpers import x``, or
    ``import helpers`` from the task folder: :func:`local_closure`) load from source too."""
    siblings = frozenset(str(f) for f in local_closure(path)[1:])
    if not siblings:
        yield
        return
    finder = _SiblingFinder(siblings)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
