"""Task code inside installed packages (evalflow/taskspec/format/installed.py): imported by its dotted name,
trusted as installed code, keyed with its distribution's version; ``include_path=lm_eval``.

Most tests use a fake distribution written to a temp site folder (tests/taskspec/conftest.py), so
they run without lm-eval; the last ones read lm-eval's own library and skip without it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from evalflow.errors import TaskError, UnsafeCodeError
from evalflow.output.run_folder import pinned
from evalflow.run.load_checks import check_selection
from evalflow.taskspec.catalog.index import TaskIndex
from evalflow.taskspec.format.installed import TASK_LIBRARIES, code_fingerprint, library_folder, package_module
from evalflow.taskspec.format.loader import function_ref
from evalflow.taskspec.format.taskcode import resolve_function

FakeSite = Callable[..., Path]


def test_a_module_of_an_installed_package_is_named_by_its_dotted_name(fake_site: FakeSite) -> None:
    tasks = fake_site(version="1.0")
    found = package_module(str(tasks / "utils.py"))
    assert found is not None
    assert (found.name, found.distribution, found.version) == ("fakepkg.tasks.fake.utils", "fakepkg", "1.0")


def test_it_is_imported_under_that_name_so_relative_imports_work(fake_site: FakeSite) -> None:
    tasks = fake_site()
    fn = resolve_function(function_ref("utils.process_results", str(tasks)))
    assert fn({"label": 0}, []) == {"acc": 1.0}  # `from ...helpers import label` resolved
    assert fn.__module__ == "fakepkg.tasks.fake.utils"
    assert sys.modules["fakepkg.tasks.fake.utils"].process_results is fn  # the package's own module object


def test_a_module_under_a_folder_that_is_no_python_name_is_installed_code_imported_by_path(
    fake_site: FakeSite,
) -> None:
    """lm-eval's openai-mmmlu/, afrobench/.../african-english/, afrixnli/anli prompt/ hold 1,000+
    tasks: their modules cannot be imported by a dotted name, but pip installed them all the same."""
    odd = fake_site() / "openai-mmmlu"
    odd.mkdir()
    (odd / "utils.py").write_text("def process_docs(ds):\n    return ds\n")
    (odd / "mmmlu.yaml").write_text(
        "task: odd_task\ndataset_path: json\ntest_split: test\noutput_type: multiple_choice\n"
        "doc_to_text: q\ndoc_to_target: 0\ndoc_to_choice: [a, b]\nprocess_docs: !function utils.process_docs\n"
    )
    found = package_module(str(odd / "utils.py"))
    assert found is not None and (found.name, found.distribution) == (None, "fakepkg")
    selection = TaskIndex.build([odd.parent.parent], builtin=False).resolve("odd_task")  # no trust_task_code
    check_selection(selection, num_fewshot=None)
    assert resolve_function(selection.tasks[0].process_docs)([1]) == [1]


def test_a_folder_that_only_shadows_a_package_name_is_loose(fake_site: FakeSite) -> None:
    tasks = fake_site(record=False)  # importable as fakepkg, but no distribution installed it
    assert package_module(str(tasks / "utils.py")) is None
    with pytest.raises(TaskError, match="ImportError: attempted relative import"):
        resolve_function(function_ref("utils.process_results", str(tasks)))  # a unique name, as before


def test_an_editable_install_is_its_checkout(fake_site: FakeSite, tmp_path: Path) -> None:
    tasks = fake_site("checkout", record=False)
    info = tmp_path / "site-packages" / "fakepkg-2.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakepkg\nVersion: 2.0\n")
    (info / "RECORD").write_text("__editable__.fakepkg-2.0.pth,,\n")
    (info / "direct_url.json").write_text(
        f'{{"url": "file://{tmp_path / "checkout"}", "dir_info": {{"editable": true}}}}'
    )
    sys.path.append(str(info.parent))
    try:
        found = package_module(str(tasks / "utils.py"))
    finally:
        sys.path.remove(str(info.parent))
    assert found is not None and (found.name, found.version) == ("fakepkg.tasks.fake.utils", "2.0")


def test_installed_task_code_needs_no_trust_and_loose_code_still_does(fake_site: FakeSite, tmp_path: Path) -> None:
    tasks = fake_site()
    selection = TaskIndex.build([tasks.parent], builtin=False).resolve("fake_task")
    check_selection(selection, num_fewshot=None)  # resolves and imports, no trust_task_code
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "fake.yaml").write_text((tasks / "fake.yaml").read_text())
    (loose / "utils.py").write_text("def process_results(doc, results):\n    return {'acc': 1.0}\n")
    with pytest.raises(UnsafeCodeError, match="not part of an installed Python package.*trust_task_code=true"):
        TaskIndex.build([loose], builtin=False).resolve("fake_task")


def test_the_key_holds_the_distribution_version_and_not_the_path(fake_site: FakeSite, tmp_path: Path) -> None:
    """The module imports the rest of its package, which no YAML names: the version stands for it."""
    utils = str(fake_site("a", version="1.0") / "utils.py")
    first = code_fingerprint(utils)
    assert function_ref("utils.process_results", os.path.dirname(utils)).source_hash == first
    moved = str(fake_site("b", version="1.0") / "utils.py")  # same content and version, elsewhere
    assert code_fingerprint(moved) == first
    upgraded = str(fake_site("c", version="1.1") / "utils.py")
    assert code_fingerprint(upgraded) != first


def test_a_library_name_stays_a_name_in_the_run_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "lm_eval").mkdir()  # a folder of that name in the working directory is not the library
    (tmp_path / "mine").mkdir()
    monkeypatch.chdir(tmp_path)
    out = pinned({"include_path": ["lm_eval", "mine"]}, None)
    assert out["include_path"] == ["lm_eval", str(tmp_path / "mine")]


def test_a_missing_library_is_one_paragraph_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, hide: Callable[..., None]
) -> None:
    hide("lm_eval")
    assert library_folder("some/folder") is None
    with pytest.raises(TaskError) as caught:
        TaskIndex.build(["lm_eval"])
    message = str(caught.value)
    assert "\n" not in message and "include_path=lm_eval" in message and "'lm_eval' is not installed" in message
    assert "pip install 'evalflow[lm-eval-tasks]'" in message
    assert TASK_LIBRARIES["lm_eval"][2] == "lm-eval-tasks"


def test_the_extra_is_in_pyproject_and_dev() -> None:
    from evalflow.taskspec.format.extras import _evalflow_extras

    extras = _evalflow_extras()
    wanted = {"lm-eval", "langdetect", "immutabledict", "nltk", "math-verify", "sympy", "rouge-score"}
    assert extras["lm-eval-tasks"] == wanted
    assert wanted <= extras["dev"]


# ---------------------------------------------------------------- lm-eval's own library


def _library(*folders: str) -> list[str]:
    pytest.importorskip("lm_eval")
    root = library_folder("lm_eval")
    assert root is not None
    return [os.path.join(root, f) for f in folders]


def test_include_path_lm_eval_is_the_installed_tasks_folder() -> None:
    lm_eval = pytest.importorskip("lm_eval")
    assert library_folder("lm_eval") == os.path.realpath(os.path.join(os.path.dirname(lm_eval.__file__), "tasks"))
    found = package_module(_library("truthfulqa")[0] + "/utils.py")
    assert found is not None and found.name == "lm_eval.tasks.truthfulqa.utils"


def _load_error(folder: list[str], task: str, trust: bool = False) -> str:
    selection = TaskIndex.build(folder, builtin=False).resolve(task, trust_task_code=trust)
    with pytest.raises(TaskError) as caught:
        check_selection(selection, num_fewshot=None)
    message = str(caught.value)
    assert "\n" not in message  # one paragraph
    return message


@pytest.mark.parametrize("task", ["truthfulqa_mc2", "truthfulqa_gen"])
def test_truthfulqa_without_rouge_score_fails_at_load(task: str, hide: Callable[..., None]) -> None:
    folder = _library("truthfulqa")
    hide("rouge_score", drop=["lm_eval.tasks.truthfulqa"])
    message = _load_error(folder, task)
    assert f"task '{task}'" in message and os.path.join(folder[0], "utils.py") in message
    assert "module 'rouge_score'" in message and "pip install 'evalflow[lm-eval-tasks]'" in message


def test_ifeval_without_langdetect_fails_at_load(hide: Callable[..., None]) -> None:
    folder = _library("ifeval")
    hide("langdetect", drop=["lm_eval.tasks.ifeval"])
    message = _load_error(folder, "ifeval")
    assert "task 'ifeval'" in message and os.path.join(folder[0], "utils.py") in message
    assert "module 'langdetect'" in message and "evalflow[lm-eval-tasks]" in message


def test_a_copy_of_lm_evals_tasks_without_lm_eval_names_the_extra(tmp_path: Path, hide: Callable[..., None]) -> None:
    """A checkout's task folder (not the installed package) whose code imports lm_eval itself."""
    import shutil

    copy = tmp_path / "ifeval"
    shutil.copytree(_library("ifeval")[0], copy, ignore=shutil.ignore_patterns("__pycache__"))
    hide("lm_eval")
    message = _load_error([str(copy)], "ifeval", trust=True)
    assert "task 'ifeval'" in message and "module 'lm_eval'" in message
    assert "pip install 'evalflow[lm-eval-tasks]'" in message


def test_other_packages_name_lm_evals_own_extra() -> None:
    pytest.importorskip("lm_eval")
    from evalflow.taskspec.format.extras import install_hint

    assert "lm-eval[longbench]" in install_hint("jieba")  # read from lm-eval's metadata
    assert "lm-eval[math]" in install_hint("antlr4")
    assert "evalflow[lm-eval-tasks]" in install_hint("math_verify")
