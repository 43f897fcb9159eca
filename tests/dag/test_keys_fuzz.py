"""Property: any single-field change changes the keys of exactly the stages that read that field
and the stages downstream of them; equal inputs always give equal keys.

The expectation is written here by hand, from what each stage computes (:data:`READS`, :data:`FEEDS`),
not read from ``dag/pipeline.py``'s declaration: a field dropped from a node there, or added to one
that does not read it, fails this test."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalflow.cache.fingerprint import fingerprint
from evalflow.dag.runner import plan
from evalflow.taskspec.format.spec import TaskConfig
from tests.support.plan_keys import BASE_SETTINGS, BASE_TASK, STAGES

# The fields that decide how a document is rendered into text (prompt, target, choices).
RENDERING = ("doc_to_text", "doc_to_target", "doc_to_choice", "target_delimiter", "output_type", "use_prompt")
SPLITS = ("training_split", "validation_split", "test_split", "fewshot_split")
# Which task fields each stage's output depends on, for a task like BASE_TASK (multiple choice, no judge
# metric, no code to run). metric_list also reaches instances (acc_mutual_info's extra requests) and
# filters (reductions over repeats); the metric lists drawn below do neither.
READS: dict[str, tuple[str, ...]] = {
    "load_docs": ("dataset_name", *SPLITS, "fewshot_config", "process_docs"),
    "fewshot": (*RENDERING, "description", "fewshot_delimiter", "fewshot_config", "gen_prefix", *SPLITS),
    "instances": (*RENDERING, "generation_kwargs", "repeats", "fewshot_delimiter", "gen_prefix")
    + ("doc_to_image", "doc_to_audio"),
    "inference": (),
    "filters": ("filter_list",),
    "metrics": (*RENDERING, "metric_list", "process_results", "repeats"),
    "aggregate": ("metric_list", "output_type", "process_results", "repeats"),
}
# Which stages read each stage's output: the documents go to every stage that shows or scores them.
FEEDS: dict[str, tuple[str, ...]] = {
    "load_docs": ("fewshot", "instances", "filters", "metrics"),
    "fewshot": ("instances",),
    "instances": ("inference", "filters"),
    "inference": ("filters",),
    "filters": ("metrics",),
    "metrics": ("aggregate",),
    "aggregate": (),
}
# Keyed by the data's identity (its bytes, fixed below) rather than by value: not drawn here.
DATA_FIELDS = {"dataset_path", "dataset_kwargs", "custom_dataset"}
# Every other field of a task: the ones no stage reads (its name, tags, metadata, ...) must change no key.
FIELDS = sorted({f.name for f in dataclasses.fields(TaskConfig)} - DATA_FIELDS)

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
    """The stages that read ``field`` and every stage downstream of them, in pipeline order."""
    changed = {stage for stage, fields in READS.items() if field in fields}
    grown = True
    while grown:
        more = {after for stage in changed for after in FEEDS[stage]} - changed
        changed |= more
        grown = bool(more)
    return [s for s in STAGES if s in changed]


def keys(task: Any) -> dict[str, str]:
    return {p.node.name: p.key for p in plan(task, BASE_SETTINGS)}


def assert_changes_exactly_its_readers(field: str, value: Any) -> None:
    if field == "metric_list":
        value = ({"metric": "acc_norm", "x": value},)  # never acc_mutual_info: that one reaches instances
    changed_task = dataclasses.replace(BASE_TASK, **{field: value})
    before, after = keys(BASE_TASK), keys(changed_task)
    if fingerprint(getattr(BASE_TASK, field)) == fingerprint(value):
        assert before == after
    else:
        assert [s for s in before if before[s] != after[s]] == expected_changed(field), field


def test_the_table_names_every_stage_the_task_runs() -> None:
    assert list(READS) == list(FEEDS) == STAGES == list(keys(BASE_TASK))


@pytest.mark.parametrize("field", FIELDS)
def test_each_field_changes_exactly_its_readers(field: str) -> None:
    """Every field once, whatever the draws below pick."""
    assert_changes_exactly_its_readers(field, f"another {field}")


@settings(max_examples=150, deadline=None)
@given(field=st.sampled_from(FIELDS), value=json_values)
def test_single_field_change_changes_exactly_its_readers(field: str, value: Any) -> None:
    assert_changes_exactly_its_readers(field, value)


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
