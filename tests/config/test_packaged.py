"""evalflow.config.packaged: the one place that locates evalflow's own files (the installed layout
runs in tests/config/test_distribution.py, from a wheel)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from evalflow.config import packaged, resolvers
from evalflow.errors import ConfigError
from tests.support.paths import ROOT

EVALFLOW = ROOT / "evalflow"
READS_FILE = {
    "evalflow/models/hf/fast/native_attention.py": "its C source, package data in native/ beside it",
    "evalflow/taskspec/sidenv/worker.py": "worker_main.py, the module beside it that the worker process runs",
}
"""The modules that may read their own ``__file__``, and why: a file beside a module is part of
the same package wherever it is installed. Every other path into evalflow's files comes from
evalflow.config.packaged, which asks the import system (``importlib.resources``) instead."""


def test_this_checkout_is_found_with_its_conf_and_tasks() -> None:
    assert packaged.package_dir() == EVALFLOW
    assert packaged.source_checkout() == ROOT
    assert (packaged.conf_dir(), packaged.tasks_dir()) == (ROOT / "conf", ROOT / "tasks")
    assert packaged.code_identity() == f"checkout {ROOT}"


@pytest.mark.parametrize("missing", [None, "pyproject.toml", "conf/__init__.py", "tasks/__init__.py"])
def test_a_checkout_is_a_folder_with_the_package_pyproject_conf_and_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str | None
) -> None:
    for name in ("evalflow/__init__.py", "pyproject.toml", "conf/__init__.py", "tasks/__init__.py"):
        if name != missing:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text("")
    monkeypatch.setattr(packaged, "package_dir", lambda: tmp_path / "evalflow")
    assert packaged.source_checkout() == (tmp_path if missing is None else None)


def test_an_installed_copy_without_its_data_package_is_one_paragraph(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packaged, "source_checkout", lambda: None)
    with pytest.raises(ConfigError) as caught:
        packaged._data_folder("not_shipped")  # the path conf_dir and tasks_dir share
    message = str(caught.value)
    assert "\n" not in message and "(the package evalflow.not_shipped) is not installed" in message
    assert "pip install -e ." in message


def test_shared_data_without_a_checkout_is_the_variable_then_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed wheel has no checkout beside which a shared/ folder could lie."""
    monkeypatch.setattr(packaged, "source_checkout", lambda: None)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVALFLOW_SHARED_DATA", str(tmp_path / "mine"))
    assert resolvers.shared_data_candidates() == [tmp_path / "mine", tmp_path / "shared" / "data"]
    monkeypatch.setattr(packaged, "source_checkout", lambda: ROOT)
    assert resolvers.shared_data_candidates()[1] == ROOT.parent / "shared" / "data"


def file_readers(root: Path) -> set[str]:
    """The modules under ``root`` whose code reads their own ``__file__`` (the name, not the string
    ``"__file__"`` of a getattr on another module), as paths relative to ``root.parent``."""
    found = set()
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(node, ast.Name) and node.id == "__file__" for node in ast.walk(tree)):
            found.add(path.relative_to(root.parent).as_posix())
    return found


def test_no_other_module_computes_paths_from_its_own_file() -> None:
    assert file_readers(EVALFLOW) == set(READS_FILE), (
        "read evalflow's own files through evalflow.config.packaged (conf_dir, tasks_dir, package_dir, "
        "source_checkout), not from __file__; a file beside its module is the exception, named in READS_FILE"
    )


def test_the_file_reader_scan_sees_names_not_strings(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "reads.py").write_text("from pathlib import Path\nROOT = Path(__file__).parents[2]\n")
    (package / "asks.py").write_text("import m\nwhere = getattr(m, '__file__', None)\n'''Path(__file__)'''\n")
    assert file_readers(package) == {"pkg/reads.py"}
