"""A failed ``nltk.download`` while task code is imported is a load-time error naming the resource
and NLTK_DATA (evalflow/taskspec/format/downloads.py), whether nltk was imported before or by the task
code itself. A stand-in ``nltk`` keeps these offline and deterministic; the real ifeval with
``NLTK_DATA`` set is in tests/taskspec/test_lm_eval_tasks_run.py."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

from evalflow.taskspec.format import taskcode
from evalflow.taskspec.format.downloads import ResourceDownloadError, strict_downloads
from evalflow.taskspec.format.loader import function_ref
from evalflow.taskspec.format.taskcode import resolve_function

TASK_CODE = """\
import nltk

nltk.download("punkt_tab")  # what lm-eval's ifeval does when the tokenizer is not found


def process_results(doc, results):
    return {"acc": 1.0}
"""


def _stand_in(answer: bool) -> ModuleType:
    module = ModuleType("nltk")
    module.download = lambda resource=None, *a, **k: answer  # type: ignore[attr-defined]
    return module


@pytest.fixture
def task_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "utils.py").write_text(TASK_CODE)
    monkeypatch.setattr(taskcode, "_MODULES", {})
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "nltk_data"))
    return tmp_path / "code"


def test_a_failed_download_of_an_imported_nltk_fails_the_load(task_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _stand_in(False)
    original = fake.download  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "nltk", fake)
    with pytest.raises(taskcode.TaskError) as caught:
        resolve_function(function_ref("utils.process_results", str(task_dir)))
    message = str(caught.value)
    assert "NLTK resource 'punkt_tab'" in message and f"NLTK_DATA is {task_dir.parent / 'nltk_data'}" in message
    assert str(task_dir / "utils.py") in message
    assert fake.download is original  # type: ignore[attr-defined]  # unpatched once the import is over


def test_nltk_imported_by_the_task_code_is_caught_too(
    task_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site" / "nltk"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("def download(resource=None, *args, **kwargs):\n    return False\n")
    # set, then delete: undoing both restores whatever was there, dropping the stand-in the task imports
    monkeypatch.setitem(sys.modules, "nltk", ModuleType("nltk"))
    monkeypatch.delitem(sys.modules, "nltk")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    finders = list(sys.meta_path)
    with pytest.raises(taskcode.TaskError, match="downloads the NLTK resource 'punkt_tab'"):
        resolve_function(function_ref("utils.process_results", str(task_dir)))
    assert sys.meta_path == finders  # the import hook is gone again


def test_a_download_that_succeeds_loads(task_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nltk", _stand_in(True))
    fn = resolve_function(function_ref("utils.process_results", str(task_dir)))
    assert fn({}, []) == {"acc": 1.0}


def test_outside_task_code_imports_nltk_is_untouched(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _stand_in(False)
    monkeypatch.setitem(sys.modules, "nltk", fake)
    with strict_downloads(), pytest.raises(ResourceDownloadError):
        fake.download("punkt_tab")  # type: ignore[attr-defined]
    assert fake.download("punkt_tab") is False  # type: ignore[attr-defined]
