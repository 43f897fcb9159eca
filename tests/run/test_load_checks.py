"""Load-time checks (evalflow/run/load_checks.py): a task that cannot be scored fails before any model
call, in a run, ``show`` and ``validate`` alike; before, an unknown metric, aggregation or filter
name, or a task module needing a missing package, failed at the metrics stage, after inference."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalflow.errors import TaskError
from tests.support.models import CountingModel
from tests.support.runs import Runner

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


def test_task_module_needing_a_missing_package_fails_at_load(runner: Runner, toy_library: Path) -> None:
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
    with pytest.raises(
        TaskError, match=r"imports 'json.no_such_part', which the installed package 'json' does not have"
    ):
        resolve_function(function_ref("needs_submodule.f", str(tmp_path)))


def test_several_broken_tasks_fail_as_one_paragraph_naming_the_first(runner: Runner, toy_library: Path) -> None:
    _write_task(toy_library, "toy_typo_a", MISSPELT[0][1])
    _write_task(toy_library, "toy_typo_b", MISSPELT[2][1])
    with pytest.raises(TaskError) as caught:
        runner(task=["toy_gen", "toy_typo_a", "toy_typo_b"], limit=3)
    message = str(caught.value)
    assert "\n" not in message and "task 'toy_typo_a'" in message
    assert "1 more of the 3 selected task(s) cannot run" in message and "evalflow validate" in message


CUSTOM_METRIC_UTILS = """\
def my_metric(items):
    return items
"""

# toy_mc (multiple_choice) with a metric of its own and a registered one (bleu) that the type never computes
UNCOMPUTED = """\
include: toy_mc.yaml
task: toy_custom
metric_list:
  - metric: acc
  - metric: !function custom.my_metric
    aggregation: mean
  - metric: bleu
"""


def test_a_metric_the_output_type_never_computes_is_named_once_at_load(
    runner: Runner,
    toy_library: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """lm-eval 0.4.13 drops them without a word; the run keeps its numbers (acc only) but warns,
    and validate lists the task as ``warn``, naming them, without failing it."""
    import logging

    from evalflow.commands import validate
    from evalflow.scoring.process import COMPUTED

    (toy_library / "custom.py").write_text(CUSTOM_METRIC_UTILS)
    path = toy_library / "toy_custom.yaml"
    path.write_text(UNCOMPUTED)
    with caplog.at_level(logging.WARNING, logger="evalflow"):
        results, _, _ = runner(task="toy_custom", limit=4, trust_task_code=True)
    assert [k for k in results["results"]["toy_custom"] if "," in k and "stderr" not in k] == ["acc,none"]
    (warning,) = [r.getMessage() for r in caplog.records if "will not be computed" in r.getMessage()]
    assert warning.startswith(f"task 'toy_custom' ({path}): metrics 'my_metric', 'bleu' of its metric_list")
    assert f"output_type multiple_choice computes only {', '.join(COMPUTED['multiple_choice'])}," in warning
    assert "use output_type: generate_until, or a process_results function that returns them" in warning

    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / "cache"))
    capsys.readouterr()
    assert (
        validate.main(["task=[toy_mc,toy_custom]", f"include_path=[{toy_library}]", "n=1", "trust_task_code=true"]) == 0
    )
    out, err = capsys.readouterr()
    assert err.count("will not be computed") == 1 and warning in err
    assert "ok  toy_mc: " in out
    assert (
        "warn toy_custom: 1 document(s) render (4 requests); metrics acc, my_metric (not computed), bleu (not computed)"
        in out
    )
    assert "1 of 2 task(s) run with the warnings above" in err


@pytest.mark.parametrize(
    "output_type,metrics,uncomputed",
    [
        ("loglikelihood", ["perplexity", "acc", "acc_norm"], ["acc_norm"]),  # registered for it, never computed
        ("loglikelihood_rolling", ["word_perplexity", "perplexity"], ["perplexity"]),
        ("multiple_choice", ["acc", "exact_match", "acc_mutual_info", "acuracy"], []),  # a typo: check_task's refusal
        ("generate_until", ["exact_match", "bleu"], []),  # calls every metric function
    ],
)
def test_uncomputed_metrics_per_output_type(output_type: str, metrics: list[str], uncomputed: list[str]) -> None:
    from evalflow.run.load_checks import uncomputed_metrics
    from evalflow.taskspec.format.spec import TaskConfig

    task = TaskConfig(task="t", output_type=output_type, metric_list=[{"metric": m} for m in metrics])
    assert uncomputed_metrics(task) == uncomputed
    assert (
        uncomputed_metrics(
            TaskConfig(
                task="t",
                output_type=output_type,
                metric_list=[{"metric": m} for m in metrics],
                process_results=lambda doc, results: {},
            )
        )
        == []
    )  # it returns every value


@pytest.mark.parametrize(
    "output_type,results,target,choices",
    [
        ("loglikelihood", [(-1.0, True)], None, None),
        ("loglikelihood_rolling", [-9.0], "two words", None),
        (
            "multiple_choice",
            [(-2.0, False), (-1.0, True), (-3.0, False), (-4.0, False)],
            1,
            ["a", "b"],
        ),  # + unconditional
    ],
)
def test_every_declared_metric_is_the_one_scoring_computes(
    output_type: str, results: list, target: object, choices: list[str] | None
) -> None:
    """COMPUTED, which the load-time warning quotes, is what score_document reports, in its order."""
    from evalflow.scoring.process import COMPUTED, score_document
    from evalflow.taskspec.format.spec import TaskConfig

    task = TaskConfig(task="t", output_type=output_type, metric_list=[{"metric": m} for m in COMPUTED[output_type]])
    row = score_document(task, {}, results, target=target, choices=choices)
    assert list(row) == list(COMPUTED[output_type])


def test_validate_names_a_document_whose_label_is_outside_its_choices(
    toy_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run logs it and scores the document wrong whatever the answer (lm-eval's behaviour);
    validate lists the task as ``warn`` and names the document, without failing it."""
    import json

    from evalflow.commands import validate

    rows = [{"question": f"{i} + 1?", "choices": ["a", "b", "c", "d"], "label": [0, 4, 3][i]} for i in range(3)]
    data = tmp_path / "labels.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (toy_library / "toy_labels.yaml").write_text(
        "include: toy_mc.yaml\ntask: toy_labels\n"
        f"dataset_kwargs:\n  data_files:\n    test: {data}\ntraining_split: null\n"
    )
    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / "cache"))
    assert validate.main(["task=[toy_mc,toy_labels]", f"include_path=[{toy_library}]"]) == 0
    out, err = capsys.readouterr()
    assert "ok  toy_mc: 3 document(s) render" in out and "warn toy_labels: 3 document(s) render" in out
    (warning,) = [line for line in err.splitlines() if "not within its" in line]
    assert warning.startswith(
        f"evalflow: warning: task 'toy_labels' ({toy_library / 'toy_labels.yaml'}), document 1: "
        "its label 4 is not within its 4 choices ['a', 'b', 'c', 'd'] (an index 0-3"
    )
    assert "Fix the document's label, or doc_to_target/doc_to_choice." in warning
