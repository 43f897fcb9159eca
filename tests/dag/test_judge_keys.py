"""The judge stages' keys, from the plan alone: each judge input changes exactly the stages that
read it (rubric and gen_kwargs: judge_requests on; the judge model: judge_inference on; parser and
policy: metrics on), and a judge request's cache key is the judge's identity and the request."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from evalflow.core.records import Request
from evalflow.dag.runner import plan
from evalflow.scale.answer_cache import request_key
from tests.support.plan_keys import BASE_SETTINGS, BASE_TASK

JUDGE = {
    "model": "dummy",
    "prompt": "Rate {{ response }} against {{ target }}:",
    "parser": {"type": "number"},
    "gen_kwargs": {"max_gen_toks": 8},
}
TASK = dataclasses.replace(
    BASE_TASK,
    output_type="generate_until",
    doc_to_choice=None,
    metric_list=({"metric": "exact_match"}, {"metric": "graded", "judge": JUDGE}),
)
SETTINGS = {**BASE_SETTINGS, "judges": {"graded": {"type": "dummy", "salt": ""}}}
STAGES = [
    "load_docs",
    "fewshot",
    "instances",
    "inference",
    "filters",
    "judge_requests",
    "judge_inference",
    "metrics",
    "aggregate",
]


@pytest.fixture(autouse=True)
def fixed_data_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    import evalflow.dag.pipeline as pipeline

    monkeypatch.setattr(pipeline, "data_identity", lambda task, data_map: "data")


def keys(task: Any, settings: Any = SETTINGS) -> dict[str, str]:
    return {p.node.name: p.key for p in plan(task, settings)}


def changed(judge: dict[str, Any] | None = None, **settings: Any) -> list[str]:
    task = dataclasses.replace(
        TASK, metric_list=({"metric": "exact_match"}, {"metric": "graded", "judge": {**JUDGE, **(judge or {})}})
    )
    before, after = keys(TASK), keys(task, {**SETTINGS, **settings})
    return [s for s in STAGES if before[s] != after[s]]


def test_a_task_with_a_judge_plans_the_judge_stages_and_one_without_does_not() -> None:
    assert list(keys(TASK)) == STAGES
    assert "judge_requests" not in keys(dataclasses.replace(TASK, metric_list=({"metric": "exact_match"},)))


@pytest.mark.parametrize(
    "edit, expected",
    [
        ({"prompt": "Grade {{ response }}:"}, STAGES[5:]),
        ({"gen_kwargs": {"max_gen_toks": 4}}, STAGES[5:]),
        ({"parser": {"type": "number", "max": 5}}, ["metrics", "aggregate"]),
        ({"on_unparsed": 0}, ["metrics", "aggregate"]),
        (
            {"model": "smollm2"},
            ["metrics", "aggregate"],
        ),  # the YAML names it; the judge's identity is the "judges" setting
    ],
)
def test_each_judge_input_changes_exactly_its_readers(edit: dict[str, Any], expected: list[str]) -> None:
    assert changed(edit) == expected


def test_the_judge_identity_changes_judge_inference_on() -> None:
    assert changed(judges={"graded": {"type": "dummy", "salt": "other"}}) == ["judge_inference", "metrics", "aggregate"]


def test_the_scored_model_changes_the_judge_requests_through_its_answers_only() -> None:
    assert changed(model="model-b") == [
        "inference",
        "filters",
        "judge_requests",
        "judge_inference",
        "metrics",
        "aggregate",
    ]


def test_a_judge_request_key_is_the_judge_identity_and_the_request() -> None:
    request = Request("generate_until", ("Rate 4 against 4:", {"max_gen_toks": 8}))
    assert request_key("judge-a", request) == request_key(
        "judge-a", Request("generate_until", ("Rate 4 against 4:", {"max_gen_toks": 8}))
    )
    assert request_key("judge-a", request) != request_key("judge-b", request)
    assert request_key("judge-a", request) != request_key(
        "judge-a", Request("generate_until", ("Rate 5 against 4:", {"max_gen_toks": 8}))
    )
    assert request_key("judge-a", request) != request_key(
        "judge-a", Request("generate_until", ("Rate 4 against 4:", {"max_gen_toks": 4}))
    )
