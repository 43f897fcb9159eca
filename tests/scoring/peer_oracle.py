"""The reference side of the golden cases: runs INSIDE lm-eval 0.4.13's venv, never in evalflow.

Reads ``{"kind": ..., "cases": [...]}`` as JSON on stdin and writes, per case, what lm-eval itself
computes for it (its own filters, ``ConfigurableTask.process_results``, ``_compute_task_aggregations``,
aggregation and stderr functions, ``Group.aggregate``) as JSON on stdout. ``make_golden.py`` stores
the answers next to the inputs in ``golden/*.json``; the tests compare evalflow against them.

    ~/.cache/evalflow-peer/venv/bin/python tests/scoring/peer_oracle.py < request.json
"""

from __future__ import annotations

import json
import logging
import os
import sys
import types
from collections import defaultdict
from typing import Any, ClassVar

os.environ.setdefault("DISABLE_MULTIPROC", "1")  # same seeded draws as the pool, without processes
logging.disable(logging.CRITICAL)

import numpy as np  # noqa: E402


def plain(value):
    """JSON-friendly copy of lm-eval's values (numpy scalars/arrays, tuples)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return value


class _Docs(list):
    features: ClassVar[dict[str, Any]] = {}


def _task(case):
    """A real ConfigurableTask over the case's documents (no dataset download)."""
    from lm_eval.api.task import ConfigurableTask

    rows = case["docs"]
    docs = _Docs(r["doc"] for r in rows)
    by_id = {id(d): r for d, r in zip(docs, rows)}
    config = {
        "task": case.get("id", "golden"),
        "output_type": case["output_type"],
        "custom_dataset": lambda **_: {"test": docs},
        "test_split": "test",
        "doc_to_text": lambda d: by_id[id(d)].get("text", "Q"),
        "doc_to_target": lambda d: by_id[id(d)]["target"],
        "metric_list": case.get("metric_list"),
        "filter_list": case.get("filter_list"),
    }
    if any("choices" in r for r in rows):
        config["doc_to_choice"] = lambda d: by_id[id(d)]["choices"]
    if case["output_type"] == "generate_until":
        config["generation_kwargs"] = {"until": ["\n\n"]}
    return ConfigurableTask(config=config), docs


def run_process(case):
    """Filters, process_results and aggregation exactly as lm-eval's evaluator runs them."""
    from lm_eval.evaluator_utils import _compute_task_aggregations

    task, docs = _task(case)
    instances = []
    for doc_id, (doc, row) in enumerate(zip(docs, case["docs"])):
        for idx, resps in enumerate(row["resps"]):
            instances.append(
                types.SimpleNamespace(doc=doc, doc_id=doc_id, idx=idx, resps=list(resps), filtered_resps={})
            )
    for pipeline in task._filters:
        pipeline.apply(instances)
    rows, raw = {}, defaultdict(list)
    for filter_key in instances[0].filtered_resps:
        rows[filter_key] = []
        for doc_id, doc in enumerate(docs):
            mine = [i for i in instances if i.doc_id == doc_id]
            metrics = task.process_results(doc, [i.filtered_resps[filter_key] for i in mine])
            rows[filter_key].append(plain(metrics))
            for metric, value in metrics.items():
                raw[(metric, filter_key)].append(value)
    out = {"rows": rows, "filtered": {k: plain([i.filtered_resps[k] for i in instances]) for k in rows}}
    if case.get("aggregate", True):
        values, _ = _compute_task_aggregations(task, dict(raw), case.get("bootstrap_iters", 100000))
        out["metrics"] = plain(values)
        out["higher_is_better"] = plain(task.higher_is_better())
    return out


def run_filters(case):
    from lm_eval.filters import build_filter_ensemble

    docs = case["docs"]
    out = {}
    for entry in case["filter_list"]:
        components = [[f["function"], {k: v for k, v in f.items() if k != "function"}] for f in entry["filter"]]
        ensemble = build_filter_ensemble(entry["name"], components)
        insts = [types.SimpleNamespace(resps=list(r), doc=d, filtered_resps={}) for r, d in zip(case["resps"], docs)]
        ensemble.apply(insts)
        out[entry["name"]] = plain([i.filtered_resps[entry["name"]] for i in insts])
    return out


def run_aggregation(case):
    from lm_eval.api.metrics import stderr_for_metric
    from lm_eval.api.registry import get_aggregation

    agg = get_aggregation(case["aggregation"])
    items = [tuple(x) if isinstance(x, list) else x for x in case["items"]]
    value = agg(items)
    stderr_fn = stderr_for_metric(agg, case.get("iters", 100000))
    stderr = stderr_fn(items) if stderr_fn and len(items) > 1 else "N/A"
    return {"value": plain(value), "stderr": plain(stderr)}


def run_group(case):
    from lm_eval.api.group import Group
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.config.group import AggMetricConfig

    group = Group(
        name=case["group"],
        aggregate_metric_list=[AggMetricConfig(**a) for a in case["aggregate_metric_list"]],
    )
    metrics = {}
    for i, (member, size) in enumerate(case["members"]):
        task = ConfigurableTask.__new__(ConfigurableTask)
        task._config = types.SimpleNamespace(task=f"member{i}")
        group.add(task)
        metrics[f"member{i}"] = {**member, "sample_len": size}
    result = group.aggregate(metrics)
    return {k: plain(v) for k, v in result.items() if "," in k}


def run_decontamination(case):
    """ConfigurableTask.doc_to_decontamination_query per document, then get_train_overlap on
    n-gram files written as lm-eval's clean_training_data scripts write them (zstd)."""
    import subprocess
    import tempfile

    from lm_eval.api.task import ConfigurableTask
    from lm_eval.decontamination.decontaminate import get_train_overlap

    docs = _Docs(case["docs"])
    docs.features = dict.fromkeys(case["docs"][0])
    config = {
        "task": case["id"],
        "output_type": "generate_until",
        "custom_dataset": lambda **_: {"test": docs},
        "test_split": "test",
        "doc_to_text": case["doc_to_text"],
        "doc_to_target": "x",
        "generation_kwargs": {"until": ["\n\n"]},
        "should_decontaminate": True,
        "doc_to_decontamination_query": case["query"],
    }
    task = ConfigurableTask(config=config)
    task.features = list(docs.features)
    queries = []
    for doc in docs:
        try:
            queries.append(plain(task.doc_to_decontamination_query(doc)))
        except Exception as exc:
            queries.append({"error": type(exc).__name__})
    with tempfile.TemporaryDirectory() as tmp:
        grams = os.path.join(tmp, "grams")
        os.makedirs(grams)
        with open(os.path.join(grams, "info.json"), "w") as fh:
            json.dump({"ngram_size": case["ngram_size"]}, fh)
        path = os.path.join(grams, "ngrams_0.bkt.txt.sorted")
        with open(path, "w") as fh:
            fh.write("".join(line + "\n" for line in case["train_ngrams"]))
        subprocess.run(["zstd", "-q", "--rm", path], check=True)
        cwd = os.getcwd()
        os.chdir(tmp)
        os.makedirs("data")
        try:
            texts = [q if isinstance(q, str) else "" for q in queries]
            overlap = get_train_overlap({(case["id"], "test"): texts}, grams, 0)
        finally:
            os.chdir(cwd)
    return {"queries": queries, "contaminated": sorted(overlap[case["id"]])}


RUNNERS = {
    "decontamination": run_decontamination,
    "process": run_process,
    "filters": run_filters,
    "aggregations": run_aggregation,
    "groups": run_group,
}


def main() -> None:
    request = json.load(sys.stdin)
    runner = RUNNERS[request["kind"]]
    answers = []
    out, sys.stdout = sys.stdout, sys.stderr  # lm-eval prints progress; keep stdout for the answer
    for case in request["cases"]:
        try:
            answers.append(runner(case))
        except Exception as exc:  # a case where lm-eval itself fails is recorded as such
            answers.append({"error": f"{type(exc).__name__}: {exc}"})
    sys.stdout = out
    json.dump(answers, sys.stdout, allow_nan=True)


if __name__ == "__main__":
    main()
