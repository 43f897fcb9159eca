"""Fixtures for task code that lives in installed packages: hiding an installed module, and a fake
distribution installed into a temp site folder (so these tests need no lm-eval)."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType

import pytest

from evalflow.taskspec.format import installed, taskcode


class _Blocker(importlib.abc.MetaPathFinder):
    """Makes ``names`` (and their submodules) import as if they were not installed."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named '{fullname}'", name=fullname)
        return None


@pytest.fixture
def hide(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """``hide("rouge_score", drop=["lm_eval.tasks.truthfulqa"])``: ``rouge_score`` cannot be imported
    and the modules under ``drop`` are imported afresh (so their imports run again)."""

    def _hide(*names: str, drop: Sequence[str] = ()) -> None:
        prefixes = tuple(names) + tuple(drop)
        for name in list(sys.modules):
            if any(name == p or name.startswith(p + ".") for p in prefixes):
                monkeypatch.delitem(sys.modules, name)
        monkeypatch.setattr(sys, "meta_path", [_Blocker(names), *sys.meta_path])
        monkeypatch.setattr(taskcode, "_MODULES", {})
        _clear_caches()

    return _hide


@pytest.fixture
def fake_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Path]]:
    """``fake_site("site", version="1.0", record=True)``: a site folder on ``sys.path`` holding
    ``fakepkg`` (see :func:`_install_fake_package`); returns its task folder. Each test imports
    ``fakepkg`` afresh."""

    def _site(name: str = "site", version: str = "1.0", *, record: bool = True) -> Path:
        site = tmp_path / name
        site.mkdir()
        tasks = _install_fake_package(site, version, record=record)
        monkeypatch.syspath_prepend(str(site))
        _forget_fakepkg()
        _clear_caches()
        return tasks

    monkeypatch.setattr(taskcode, "_MODULES", {})
    yield _site
    _forget_fakepkg()
    _clear_caches()


def _forget_fakepkg() -> None:
    for name in [n for n in sys.modules if n == "fakepkg" or n.startswith("fakepkg.")]:
        del sys.modules[name]


def _clear_caches() -> None:
    installed._package_root.cache_clear()
    installed._distributions_of.cache_clear()


def _install_fake_package(site: Path, version: str = "1.0", *, record: bool = True) -> Path:
    """``site/fakepkg`` with a task folder ``tasks/fake`` whose code imports its own package
    relatively, and (``record``) the ``fakepkg-<version>.dist-info`` pip would write beside it.
    Returns the task folder."""
    package = site / "fakepkg"
    tasks = package / "tasks" / "fake"
    tasks.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tasks" / "__init__.py").write_text("")
    (package / "helpers.py").write_text("def label(doc):\n    return doc['label']\n")
    (tasks / "utils.py").write_text(
        "from ...helpers import label  # a relative import: works only as fakepkg.tasks.fake.utils\n\n\n"
        "def process_results(doc, results):\n    return {'acc': float(label(doc) == 0)}\n"
    )
    (tasks / "fake.yaml").write_text(
        "task: fake_task\ndataset_path: json\ntest_split: test\noutput_type: multiple_choice\n"
        "doc_to_text: q\ndoc_to_target: 0\ndoc_to_choice: [a, b]\n"
        "process_results: !function utils.process_results\nmetric_list:\n  - metric: acc\n"
    )
    if record:
        info = site / f"fakepkg-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fakepkg\nVersion: {version}\n")
        (info / "RECORD").write_text("fakepkg/__init__.py,,\nfakepkg/helpers.py,,\nfakepkg/tasks/fake/utils.py,,\n")
        (info / "top_level.txt").write_text("fakepkg\n")
    return tasks
