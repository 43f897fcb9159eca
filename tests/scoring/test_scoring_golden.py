"""evalflow's scoring against lm-eval 0.4.13's own numbers (golden/*.json, made by make_golden.py).

Every case runs evalflow's side here and compares with the stored lm-eval answer: filtered
responses, per-document metric dicts (keys in lm-eval's order), aggregated numbers with stderrs
(bootstrap included) and higher_is_better. When lm-eval's venv is present, the stored answers are
also recomputed, so the files cannot drift from the reference.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

import pytest

from evalflow.scoring import (
    AGGREGATIONS,
    aggregate_group,
    aggregate_task,
    build_pipelines,
    score_document,
)
from evalflow.scoring.aggregations import stderr_fn
from evalflow.taskspec.format.spec import TaskConfig
from tests.support.scoring_golden import (
    load_golden,
    normal,
    peer_available,
    run_oracle,
    same,
)


def _ids(kind: str) -> list[str]:
    return [
        str(c["input"].get("id") or c["input"].get("group") or c["input"].get("aggregation")) for c in load_golden(kind)
    ]


def _task(case: dict[str, Any]) -> TaskConfig:
    return TaskConfig(
        task=case["id"],
        output_type=case["output_type"],
        metric_list=tuple(case["metric_list"]) if case.get("metric_list") is not None else None,
        filter_list=tuple(case["filter_list"]) if case.get("filter_list") is not None else None,
    )


def _gold(row: dict[str, Any]) -> Any:
    """lm-eval's gold: doc_to_text for multiple-input tasks (an int), else doc_to_target."""
    return row["text"] if isinstance(row.get("text"), int) else row["target"]


def run_process(case: dict[str, Any]) -> dict[str, Any]:
    """Filters -> score_document -> aggregate_task, the way the DAG stages call them."""
    task = _task(case)
    resps, docs, owners = [], [], []
    for doc_id, row in enumerate(case["docs"]):
        for r in row["resps"]:
            resps.append(r)
            docs.append(row["doc"])
            owners.append(doc_id)
    out: dict[str, Any] = {"rows": {}, "filtered": {}}
    for pipeline in build_pipelines(task.filter_list):
        values = pipeline.apply(resps, docs)
        out["filtered"][pipeline.name] = list(values)
        per_doc: dict[int, list[Any]] = defaultdict(list)
        for owner, value in zip(owners, values):
            per_doc[owner].append(value)
        out["rows"][pipeline.name] = [
            score_document(task, row["doc"], per_doc[i], target=_gold(row), choices=row.get("choices"))
            for i, row in enumerate(case["docs"])
        ]
    if case.get("aggregate", True):
        iters = case.get("bootstrap_iters", 100000)
        out["metrics"], out["higher_is_better"] = aggregate_task(task, out["rows"], bootstrap_iters=iters)
    return out


@pytest.mark.parametrize("golden", load_golden("process"), ids=_ids("process"))
def test_process_case_matches_lm_eval(golden: dict[str, Any]) -> None:
    actual, expected = run_process(golden["input"]), golden["expected"]
    assert normal(actual["filtered"]) == normal(expected["filtered"]) or same(actual["filtered"], expected["filtered"])
    assert same(actual["rows"], expected["rows"]), (normal(actual["rows"]), expected["rows"])
    if "metrics" in expected:
        assert same(actual["metrics"], expected["metrics"], rel=1e-9), (
            actual["metrics"],
            expected["metrics"],
        )
        assert actual["higher_is_better"] == expected["higher_is_better"]


@pytest.mark.parametrize("golden", load_golden("filters"), ids=_ids("filters"))
def test_filter_case_matches_lm_eval(golden: dict[str, Any]) -> None:
    case = golden["input"]
    actual = {p.name: list(p.apply(case["resps"], case["docs"])) for p in build_pipelines(case["filter_list"])}
    assert normal(actual) == golden["expected"]


def run_aggregation(case: dict[str, Any]) -> dict[str, Any]:
    agg = AGGREGATIONS.get(case["aggregation"])
    items = [tuple(x) if isinstance(x, list) else x for x in case["items"]]
    fn = stderr_fn(agg, case.get("iters", 100000))
    return {"value": agg(items), "stderr": fn(items) if fn and len(items) > 1 else "N/A"}


@pytest.mark.parametrize("golden", load_golden("aggregations"), ids=_ids("aggregations"))
def test_aggregation_case_matches_lm_eval(golden: dict[str, Any]) -> None:
    actual = run_aggregation(golden["input"])
    assert same(actual, golden["expected"], rel=1e-12), (actual, golden["expected"])


def run_group(case: dict[str, Any]) -> dict[str, Any]:
    members = [(metrics, size) for metrics, size in case["members"]]
    return aggregate_group(case["group"], case["aggregate_metric_list"], members)


@pytest.mark.parametrize("golden", load_golden("groups"), ids=_ids("groups"))
def test_group_case_matches_lm_eval(golden: dict[str, Any]) -> None:
    actual = run_group(golden["input"])
    assert same(actual, golden["expected"], rel=1e-12), (actual, golden["expected"])


@pytest.mark.slow
@pytest.mark.skipif(not peer_available(), reason="lm-eval's venv (~/.cache/evalflow-peer/venv) is absent")
@pytest.mark.parametrize("kind", ["process", "filters", "aggregations", "groups"])
def test_golden_files_match_lm_eval(kind: str) -> None:
    """The stored answers are what lm-eval computes today (slow sklearn bootstraps: EVALFLOW_PEER_SLOW=1)."""
    stored = load_golden(kind)
    if not os.environ.get("EVALFLOW_PEER_SLOW"):
        stored = [c for c in stored if not c["input"].get("slow")]
    fresh = run_oracle(kind, [c["input"] for c in stored])
    for case, answer in zip(stored, fresh):
        assert same(answer, case["expected"], rel=1e-12), (case["input"], answer, case["expected"])
