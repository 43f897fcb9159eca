"""Resource downloads that task code starts when it is imported, made to fail loudly.

lm-eval's ifeval module calls ``nltk.download("punkt_tab")`` at import when the tokenizer is not
on NLTK's data path. Offline, NLTK prints one line and returns ``False``; the import succeeds and
scoring fails later, after every answer was generated. While evalflow imports task code (at load
time: run, ``show``, ``validate``), :func:`strict_downloads` makes ``nltk.download`` raise
:class:`ResourceDownloadError` when it returns ``False``, naming the resource and ``NLTK_DATA``.
It applies to every task module (nothing names ifeval) and to nltk whether or not it was already
imported: if not, a meta-path finder patches it the moment task code imports it, so a run whose
tasks never use nltk never pays its ~5 s import.

    with strict_downloads():
        spec.loader.exec_module(module)   # a failed nltk.download raises ResourceDownloadError
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any

from evalflow.errors import TaskError

__all__ = ["ResourceDownloadError", "strict_downloads"]

_NLTK = "nltk"


class ResourceDownloadError(TaskError):
    """Task code asked NLTK to download a resource at import, and the download failed."""


def strict_downloads() -> contextlib.AbstractContextManager[None]:
    """While active, a failed ``nltk.download(resource)`` raises instead of returning False."""
    return _strict()


@contextlib.contextmanager
def _strict() -> Iterator[None]:
    patched: list[tuple[ModuleType, Any]] = []
    finder = None
    loaded = sys.modules.get(_NLTK)
    if loaded is not None:
        _patch(loaded, patched)
    else:
        finder = _PatchOnImport(lambda module: _patch(module, patched))
        sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        if finder is not None and finder in sys.meta_path:
            sys.meta_path.remove(finder)
        for module, original in patched:
            vars(module)["download"] = original


def _patch(module: ModuleType, patched: list[tuple[ModuleType, Any]]) -> None:
    original = getattr(module, "download", None)
    if not callable(original):
        return

    def download(info_or_id: Any = None, *args: Any, **kwargs: Any) -> Any:
        ok = original(info_or_id, *args, **kwargs)
        if ok is False:  # NLTK reports a failed download by printing it and returning False
            caller = sys._getframe(1).f_globals.get("__file__") or "task code"
            raise ResourceDownloadError(_message(info_or_id, str(caller)))
        return ok

    patched.append((module, original))
    vars(module)["download"] = download


def _message(resource: Any, caller: str) -> str:
    data = os.environ.get("NLTK_DATA")
    now = f"NLTK_DATA is {data}" if data else "NLTK_DATA is not set"
    return (
        f"{caller} downloads the NLTK resource '{resource}' when imported (nltk.download({resource!r})), and "
        f"the download failed (no network?); {now}. Put '{resource}' in a folder and point NLTK_DATA "
        f"at it (on a machine with network: `python -m nltk.downloader -d DIR {resource}`, then "
        f"NLTK_DATA=DIR), or run where NLTK can download it. Scoring would fail without it."
    )


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds ``nltk`` through the other finders and patches the module once it has executed."""

    def __init__(self, on_load: Callable[[ModuleType], None]) -> None:
        self.on_load = on_load

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _NLTK:
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec: importlib.machinery.ModuleSpec | None = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Patching(spec.loader, self.on_load)
                return spec
        return None


class _Patching(importlib.abc.Loader):
    """A loader that runs ``inner`` and then ``on_load`` on the executed module."""

    def __init__(self, inner: Any, on_load: Callable[[ModuleType], None]) -> None:
        self.inner, self.on_load = inner, on_load

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        self.on_load(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_resource_reader, is_package, ...
        return getattr(self.inner, name)
