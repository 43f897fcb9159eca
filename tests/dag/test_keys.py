"""Each kind of change changes the keys of exactly the stages that read it (computed from the plan,
without running anything)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from evalflow.dag.runner import plan
from evalflow.taskspec.format.spec import TaskConfig
from tests.support.plan_keys import BASE_SETTINGS, BASE_TASK
from tests.support.plan_keys import STAGES as S


@pytest.fixture(autouse=True)
def fixed_data_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    import evalflow.dag.pipeline as pipeline

    monkeypatch.setattr(pipeline, "data_identity", lambda task, data_map: f"data-of-{task.dataset_name}")


def changed(task: TaskConfig = BASE_TASK, **settings: Any) -> list[str]:
    before = {p.node.name: p.key for p in plan(BASE_TASK, BASE_SETTINGS)}
    after = {p.node.name: p.key for p in plan(task, {**BASE_SETTINGS, **settings})}
    return [s for s in S if before[s] != after[s]]


CASES = [
    ("dataset_name", {"dataset_name": "other"}, S),
    ("test_split", {"test_split": "validation"}, S),
    ("doc_to_text", {"doc_to_text": "Question: {{q}}"}, S[1:]),
    ("description", {"description": "Answer.\n"}, S[1:]),
    ("fewshot_delimiter", {"fewshot_delimiter": "\n"}, S[1:]),
    ("target_delimiter", {"target_delimiter": ""}, S[1:]),
    ("generation_kwargs", {"generation_kwargs": {"until": ["\n"]}}, S[2:]),
    ("repeats", {"repeats": 2}, S[2:]),
    ("doc_to_image (which images each request shows)", {"doc_to_image": ["image"]}, S[2:]),
    ("doc_to_audio", {"doc_to_audio": "audio"}, S[2:]),
    ("filter_list", {"filter_list": ({"name": "x", "filter": ({"function": "take_first"},)},)}, S[4:]),
    ("metric_list", {"metric_list": ({"metric": "acc_norm"},)}, S[5:]),
    ("metric_list adds acc_mutual_info", {"metric_list": ({"metric": "acc"}, {"metric": "acc_mutual_info"})}, S[2:]),
    ("metric_list adds a reduction", {"metric_list": ({"metric": "acc", "reduction": "mean"},)}, S[5:]),
    ("tag only", {"tag": ("x",)}, []),
    ("task_alias only", {"task_alias": "T"}, []),
    ("metadata only", {"metadata": {"version": 2}}, []),
    ("data file path only", {"dataset_kwargs": {"data_files": {"test": "/elsewhere/test.jsonl"}}}, []),
]


@pytest.mark.parametrize("name,change,expected", CASES, ids=[c[0] for c in CASES])
def test_task_field_changes(name: str, change: dict[str, Any], expected: list[str]) -> None:
    assert changed(dataclasses.replace(BASE_TASK, **change)) == expected


SETTING_CASES = [
    ("num_fewshot", {"num_fewshot": 5}, S[1:]),
    ("fewshot seed", {"fewshot_seed": 1}, S[1:]),
    ("limit", {"limit": 10}, S[1:]),
    ("samples (which documents are evaluated)", {"samples": (0, 3, 7)}, S[1:]),
    ("gen_kwargs", {"gen_kwargs": {"temperature": 0.5}}, S[2:]),
    ("model", {"model": "model-b"}, S[3:]),
    ("bootstrap_iters", {"bootstrap_iters": 10}, S[6:]),
    ("think_end_token", {"think_end_token": "</think>"}, S[4:]),
    ("system_instruction", {"system_instruction": "Be brief."}, S[1:]),
    ("chat template text", {"chat": {"template": "{{ messages }}", "fewshot_as_multiturn": False}}, S[1:]),
    ("apply_chat_template", {"apply_chat_template": True}, S[2:]),
    ("data_map (bytes unchanged)", {"data_map": {"x": {"path": "json"}}}, []),
]


@pytest.mark.parametrize("name,change,expected", SETTING_CASES, ids=[c[0] for c in SETTING_CASES])
def test_run_setting_changes(name: str, change: dict[str, Any], expected: list[str]) -> None:
    assert changed(**change) == expected


def test_chat_template_args_rekey_the_prompts_and_what_follows_them() -> None:
    """chat_template_args reach the stages as the chat format's template_args (run.phases.chat_format)."""
    chat = {"template": "{{ messages }}", "fewshot_as_multiturn": False}
    before = {p.node.name: p.key for p in plan(BASE_TASK, {**BASE_SETTINGS, "chat": chat})}
    with_args = {**BASE_SETTINGS, "chat": {**chat, "template_args": {"enable_thinking": False}}}
    after = {p.node.name: p.key for p in plan(BASE_TASK, with_args)}
    assert [s for s in S if before[s] != after[s]] == S[1:]


def test_predict_only_rekeys_only_scoring() -> None:
    """predict_only bypasses the metrics: requests and the model's answers stay cached."""
    from evalflow.taskspec.catalog.run_options import predicting

    assert changed(predicting(BASE_TASK)) == S[5:]


def test_equal_inputs_give_equal_keys() -> None:
    copy = dataclasses.replace(BASE_TASK, metric_list=tuple(dict(m) for m in BASE_TASK.metric_list or ()))
    assert changed(copy) == []


GEN_TASK = dataclasses.replace(
    BASE_TASK,
    output_type="generate_until",
    doc_to_choice=None,
    repeats=8,
    generation_kwargs={"until": ["\n"], "do_sample": True, "temperature": 0.7},
    metric_list=({"metric": "exact_match", "reduction": "pass@k"},),
)


def test_a_reduction_over_repeats_rekeys_the_filters() -> None:
    """The filters stage runs each repeat alone only when some metric reduces repeats: adding or
    removing the first reduction of a repeated task re-runs it (no model call), switching one does not."""
    plain = dataclasses.replace(GEN_TASK, metric_list=({"metric": "exact_match"},))
    before = {p.node.name: p.key for p in plan(GEN_TASK, BASE_SETTINGS)}
    after = {p.node.name: p.key for p in plan(plain, BASE_SETTINGS)}
    assert [s for s in S if before[s] != after[s]] == S[4:]


@pytest.mark.parametrize("reduction", ["first", "maj@k", ["mean", "max"], "pass@4"])
def test_changing_only_the_reduction_rekeys_metrics_and_aggregate(reduction: Any) -> None:
    """The filters stage runs every repeat alone whatever the reduction, so only the stages that
    read ``reduction`` (metrics, aggregate) re-run; with no model call."""
    task = dataclasses.replace(GEN_TASK, metric_list=({"metric": "exact_match", "reduction": reduction},))
    before = {p.node.name: p.key for p in plan(GEN_TASK, BASE_SETTINGS)}
    after = {p.node.name: p.key for p in plan(task, BASE_SETTINGS)}
    assert [s for s in S if before[s] != after[s]] == S[5:]


def keys(task: TaskConfig = BASE_TASK) -> dict[str, str | None]:
    return {p.node.name: p.key for p in plan(task, BASE_SETTINGS)}


def _builtin(kind: str, name: str) -> Any:
    from evalflow.scoring import AGGREGATIONS, FILTERS, METRICS

    return {
        "metric": lambda: METRICS.get(name).fn,
        "aggregation": lambda: AGGREGATIONS.get(name),
        "filter": lambda: FILTERS.get(name),
    }[kind]()


COMPONENT_CASES = [
    ("built-in metric acc", "metric", "acc", S[5:]),
    ("built-in aggregation mean", "aggregation", "mean", S[6:]),
    ("built-in filter take_first (the default pipeline)", "filter", "take_first", S[4:]),
    ("a component the task does not call", "aggregation", "median", []),
]


def test_a_reductions_code_is_in_the_metrics_key(monkeypatch: pytest.MonkeyPatch) -> None:
    import evalflow.scoring.components as components
    from evalflow.scoring import REDUCTIONS

    target, real = REDUCTIONS.get("pass@k"), components.code_hash
    before = keys(GEN_TASK)
    monkeypatch.setattr(components, "code_hash", lambda obj: "edited" if obj is target else real(obj))
    after = keys(GEN_TASK)
    assert [s for s in S if before[s] != after[s]] == S[5:]
    assert keys() == {p.node.name: p.key for p in plan(BASE_TASK, BASE_SETTINGS)}  # a task without it: unchanged


@pytest.mark.parametrize("name,kind,component,expected", COMPONENT_CASES, ids=[c[0] for c in COMPONENT_CASES])
def test_component_source_changes(
    name: str, kind: str, component: str, expected: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registered component's source hash is in the key of exactly the stages that call it."""
    import evalflow.scoring.components as components

    target, real = _builtin(kind, component), components.code_hash
    before = keys()
    monkeypatch.setattr(components, "code_hash", lambda obj: "edited" if obj is target else real(obj))
    after = keys()
    assert [s for s in S if before[s] != after[s]] == expected


@pytest.mark.parametrize("field,value", [("aggregation", "median"), ("higher_is_better", False)])
def test_a_metric_registration_rekeys_aggregate_only(field: str, value: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """What aggregate takes from ``register_metric`` (default aggregation, direction) is in its key."""
    from evalflow.scoring import METRICS

    before = keys()
    monkeypatch.setitem(METRICS._objects, "acc", dataclasses.replace(METRICS.get("acc"), **{field: value}))
    after = keys()
    assert [s for s in S if before[s] != after[s]] == S[6:]


def test_user_filter_function_and_class_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """A registered filter, function or lm-eval-style class, re-keys filters and what follows."""
    import evalflow.scoring.components as components
    from evalflow.scoring import register_filter

    @register_filter("test_keys_shout")
    def shout(resps: list, docs: list) -> list:
        return [[r.upper() for r in inst] for inst in resps]

    @register_filter("test_keys_strip")
    class Strip:
        def apply(self, resps: list, docs: list) -> list:
            return [[r.strip() for r in inst] for inst in resps]

    steps = ({"function": "test_keys_shout"}, {"function": "test_keys_strip"}, {"function": "take_first"})
    task = dataclasses.replace(BASE_TASK, output_type="generate_until", filter_list=({"name": "x", "filter": steps},))
    real = components.code_hash
    for target in (shout, Strip):
        before = keys(task)
        monkeypatch.setattr(components, "code_hash", lambda obj, t=target: "edited" if obj is t else real(obj))
        after = keys(task)
        monkeypatch.setattr(components, "code_hash", real)
        assert [s for s in S if before[s] != after[s]] == S[4:]
