"""Property: any single-field change changes the keys of exactly the stages that read that field
and the stages downstream of them; equal inputs always give equal keys."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalflow.cache.fingerprint import fingerprint
from evalflow.dag.pipeline import PIPELINE
from evalflow.dag.runner import plan
from tests.support.plan_keys import BASE_SETTINGS, BASE_TASK

HASHED_FIELDS = sorted({f for n in PIPELINE for f in n.task_fields if f not in n.unhashed})
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=8), st.floats(allow_nan=False))
json_values = st.recursive(
    json_scalars,
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=4), c, max_size=3)),
    max_leaves=6,
)


@pytest.fixture(autouse=True)
def fixed_data_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    import evalflow.dag.pipeline as pipeline

    monkeypatch.setattr(pipeline, "data_identity", lambda task, data_map: "data")


def expected_changed(field: str) -> list[str]:
    changed: set[str] = set()
    for node in PIPELINE:
        if node.applies is not None and not node.applies(BASE_TASK):
            continue  # a stage the task does not run (the judge stages, for a task without judge metrics)
        if (field in node.task_fields and field not in node.unhashed) or changed & set(node.upstream):
            changed.add(node.name)
    return [n.name for n in PIPELINE if n.name in changed]


def keys(task: Any) -> dict[str, str]:
    return {p.node.name: p.key for p in plan(task, BASE_SETTINGS)}


@settings(max_examples=150, deadline=None)
@given(field=st.sampled_from(HASHED_FIELDS), value=json_values)
def test_single_field_change_changes_exactly_its_readers(field: str, value: Any) -> None:
    if field == "metric_list":
        value = ({"metric": "acc_norm", "x": value},)  # never acc_mutual_info: that one reaches instances
    changed_task = dataclasses.replace(BASE_TASK, **{field: value})
    before, after = keys(BASE_TASK), keys(changed_task)
    if fingerprint(getattr(BASE_TASK, field)) == fingerprint(value):
        assert before == after
    else:
        assert [s for s in before if before[s] != after[s]] == expected_changed(field)


@settings(max_examples=50, deadline=None)
@given(value=json_values)
def test_equal_inputs_equal_keys(value: Any) -> None:
    a = dataclasses.replace(BASE_TASK, generation_kwargs={"v": value})
    b = dataclasses.replace(BASE_TASK, generation_kwargs={"v": value})
    assert keys(a) == keys(b)


def _registered_metrics() -> list[str]:
    from evalflow.scoring import METRICS

    return sorted(METRICS.names())


@settings(max_examples=60, deadline=None)
@given(metric=st.sampled_from(_registered_metrics()), edit=st.sampled_from(["metric", "aggregation"]))
def test_any_registered_metric_or_its_aggregation_edit(metric: str, edit: str) -> None:
    """Editing any registered metric re-keys metrics (and aggregate, downstream); editing the
    aggregation it registered re-keys aggregate alone. Other stages never move."""
    import evalflow.scoring.components as components
    from evalflow.scoring import AGGREGATIONS, METRICS

    task = dataclasses.replace(BASE_TASK, metric_list=({"metric": metric},))
    registered = METRICS.get(metric)
    target = registered.fn if edit == "metric" else AGGREGATIONS.get(registered.aggregation or "mean")
    real = components.code_hash
    before = keys(task)
    components.code_hash = lambda obj: "edited" if obj is target else real(obj)
    try:
        after = keys(task)
    finally:
        components.code_hash = real
    expected = ["metrics", "aggregate"] if edit == "metric" else ["aggregate"]
    assert [s for s in before if before[s] != after[s]] == expected
