"""A judge entry of ``metric_list`` is resolved in one place: what the judge stages read
(``judge_specs``) is what scoring's metric list holds, and a bad entry is one error, the same
from either side, naming the entry by its position."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from evalflow.errors import TaskError
from evalflow.judges.judge_metrics import has_judges, judge_metric, judge_specs
from evalflow.scoring.metric_functions import task_metric_specs
from evalflow.taskspec.format.spec import TaskConfig

GRADED = {"metric": "graded", "judge": {"prompt": "{{ response }}", "parser": {"type": "number", "max": 5}}}
POLITE = {
    "metric": "polite",
    "judge": {"prompt": "{{ doc.q }}: {{ response }}", "parser": {"type": "choice", "choices": {"yes": 1, "no": 0}}},
    "aggregation": "mean",
}
TASK = TaskConfig(
    task="t",
    output_type="generate_until",
    metric_list=({"metric": "exact_match"}, GRADED, POLITE),
    source="tasks/t.yaml",
)


def test_the_stages_and_scoring_see_the_same_judges_in_metric_list_order() -> None:
    from_scoring = [s.judge for s in task_metric_specs(TASK) if s.judge is not None]
    assert [s.metric for s in judge_specs(TASK)] == ["graded", "polite"]
    assert list(judge_specs(TASK)) == from_scoring
    assert [s.parse("4") for s in judge_specs(TASK)] == [4.0, None]


def test_an_entry_without_a_judge_block_is_no_judge() -> None:
    assert judge_metric(TASK, {"metric": "exact_match"}, "here") is None
    plain = dataclasses.replace(TASK, metric_list=({"metric": "exact_match"},))
    assert not has_judges(plain) and judge_specs(plain) == ()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"output_type": "multiple_choice", "doc_to_choice": ["a", "b"]}, "needs output_type: generate_until"),
        ({"metric_list": ({"metric": "", "judge": GRADED["judge"]},)}, "'metric' is the name its value"),
    ],
)
def test_a_bad_judge_entry_is_one_error_from_either_side(change: dict[str, Any], message: str) -> None:
    task = dataclasses.replace(TASK, **change)
    index = 1 if "output_type" in change else 0
    errors = []
    for resolve in (judge_specs, task_metric_specs):
        with pytest.raises(TaskError, match=message) as caught:
            resolve(task)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and errors[0].startswith(f"tasks/t.yaml: task 't' metric_list[{index}]:")
