"""Load-time checks (evalflow/load_checks.py): a task that cannot be scored fails before any model
call, in a run, ``show`` and ``validate`` alike; before, an unknown metric, aggregation or filter
name, or a task module needing a missing package, failed at the metrics stage, after inference."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalflow.errors import TaskError
from tests.conftest import Runner
from tests.support.models import CountingModel

# (what is misspelt, the override of toy_gen it makes, the did-you-mean the error must give)
MISSPELT = [
    ("metric", "metric_list:\n  - metric: exact_mach\n    aggregation: mean\n", "did you mean 'exact_match'"),
    ("aggregation", "metric_list:\n  - metric: exact_match\n    aggregation: meen\n", "did you mean 'mean'"),
    ("filter", "filter_list:\n  - name: x\n    filter:\n      - function: take_frist\n", "did you mean 'take_first'"),
]

MISSING_PACKAGE_UTILS = """\
import evalflow_test_missing_pkg  # a package nobody has installed


def process_results(doc, results):
    return {"exact_match": 1.0}
"""


def _write_task(library: Path, name: str, extra: str) -> Path:
    path = library / f"{name}.yaml"
    path.write_text(f"include: toy_gen.yaml\ntask: {name}\n{extra}")
    return path


@pytest.mark.parametrize("what,extra,hint", MISSPELT, ids=[m[0] for m in MISSPELT])
def test_run_with_an_unknown_name_fails_before_any_model_call(
    runner: Runner, toy_library: Path, what: str, extra: str, hint: str
) -> None:
    path = _write_task(toy_library, "toy_typo", extra)
    CountingModel.reset()
    with pytest.raises(TaskError) as caught:
        runner(task="toy_typo", limit=3)
    message = str(caught.value)
    assert f"unknown {what}" in message and hint in message
    assert "'toy_typo'" in message and str(path) in message
    assert CountingModel.calls_total == 0  # the model answered nothing
    assert not list(runner.out.rglob("manifest.json"))  # no run folder claims completion


def test_show_and_validate_fail_on_an_unknown_metric(
    toy_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalflow.commands import show, validate

    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / "cache"))
    _write_task(toy_library, "toy_typo", MISSPELT[0][1])
    args = ["task=[toy_gen,toy_typo]", f"include_path=[{toy_library}]", "n=1"]
    with pytest.raises(TaskError, match="unknown metric 'exact_mach'; did you mean 'exact_match'"):
        show.main(args)
    capsys.readouterr()
    assert validate.main(args) == 2
    out, err = capsys.readouterr()
    assert "ok  toy_gen" in out and "toy_typo" not in out
    assert "task 'toy_typo'" in err and "unknown metric 'exact_mach'" in err


def test_task_module_needing_a_missing_package_fails_at_load(
    runner: Runner, toy_library: Path
) -> None:
    (toy_library / "needs_pkg.py").write_text(MISSING_PACKAGE_UTILS)
    path = _write_task(toy_library, "toy_pkg", "process_results: !function needs_pkg.process_results\n")
    CountingModel.reset()
    with pytest.raises(TaskError) as caught:
        runner(task="toy_pkg", limit=3, trust_task_code=True)
    message = str(caught.value)
    assert "task 'toy_pkg'" in message and str(path) in message and "`process_results`" in message
    assert "module 'evalflow_test_missing_pkg'" in message
    assert "pip install evalflow_test_missing_pkg" in message
    assert CountingModel.calls_total == 0
    assert not list(runner.out.rglob("manifest.json"))


def test_missing_module_messages_name_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalflow.taskspec.format import extras
    from evalflow.taskspec.format.loader import function_ref, resolve_function

    (tmp_path / "needs_pkg.py").write_text(MISSING_PACKAGE_UTILS)
    (tmp_path / "needs_submodule.py").write_text("import json.no_such_part\n")
    # an import name whose distribution is named differently (sklearn -> scikit-learn)
    monkeypatch.setitem(extras._PIP_NAMES, "evalflow_test_missing_pkg", "evalflow-test-dist")
    with pytest.raises(TaskError, match=r"`pip install evalflow-test-dist`"):
        resolve_function(function_ref("needs_pkg.process_results", str(tmp_path)))
    with pytest.raises(TaskError, match=r"imports 'json.no_such_part', which the installed package 'json' does not have"):
        resolve_function(function_ref("needs_submodule.f", str(tmp_path)))


def test_several_broken_tasks_fail_as_one_paragraph_naming_the_first(runner: Runner, toy_library: Path) -> None:
    _write_task(toy_library, "toy_typo_a", MISSPELT[0][1])
    _write_task(toy_library, "toy_typo_b", MISSPELT[2][1])
    with pytest.raises(TaskError) as caught:
        runner(task=["toy_gen", "toy_typo_a", "toy_typo_b"], limit=3)
    message = str(caught.value)
    assert "\n" not in message and "task 'toy_typo_a'" in message
    assert "1 more of the 3 selected task(s) cannot run" in message and "evalflow validate" in message
