"""Per task with a ``cluster_key``: each scored document's cluster id and the clustered stderr.

results.json keeps lm-eval's per-task ``<metric>_stderr,<filter>`` byte for byte (documents counted
as independent) and gets, beside it, a top-level block that lm-eval's table never prints::

    "clustered_stderr": {"boolq": {"acc,none": 0.0087, "clusters": 2939, "documents": 3270,
                                   "cluster_key": "passage"}}

The value is Miller's cluster-robust standard error of the mean
(:func:`evalflow.scoring.cluster_stderr.clustered_stderr`), for every metric lm-eval gives a stderr
whose value is the mean of the documents' values (a corpus metric such as bleu or f1 is no mean
of per-document values, and gets none). The ids themselves go in each samples line (``cluster``)
and are read back by :meth:`evalflow.output.run_folder.Run.clusters`.

It is an output node (``clusters`` in :data:`evalflow.dag.pipeline.OUTPUTS`), keyed by
``cluster_key``, the documents, the scores and the aggregate: editing ``cluster_key`` recomputes
this node and the samples text, and no stage.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from evalflow.core.records import DocSet, Scores, TaskResult
from evalflow.scoring.cluster_stderr import clustered_stderr
from evalflow.taskspec.format.spec import TaskConfig
from evalflow.taskspec.prompts.clusters import cluster_ids

STDERR = "_stderr,"


def cluster_stats(task: TaskConfig, docs: DocSet, scores: Scores, result: TaskResult) -> dict[str, Any] | None:
    """The node: ``{"cluster_key", "clusters", "documents", "stderr": {key: se}}`` over the scored
    documents (their ids are in the samples lines); None for a task without ``cluster_key``."""
    ids = cluster_ids(task, docs.docs)
    if ids is None:
        return None
    scored = {doc_id: ids[doc_id] for doc_id in scores.doc_ids}
    stderr: dict[str, float] = {}
    for key in result.metrics:
        metric, sep, filt = key.partition(",")
        if not sep or STDERR in key or f"{metric}{STDERR}{filt}" not in result.metrics:
            continue
        rows = scores.by_filter.get(filt, ())
        pairs = [(row[metric], scored[d]) for d, row in zip(scores.doc_ids, rows) if _number(row.get(metric))]
        if len(pairs) < 2 or not _is_mean([v for v, _ in pairs], result.metrics[key]):
            continue
        stderr[key] = clustered_stderr([float(v) for v, _ in pairs], [c for _, c in pairs])
    return {
        "cluster_key": task.cluster_key,
        "clusters": len(set(scored.values())),
        "documents": len(scored),
        "stderr": stderr,
    }


def results_entry(stats: Mapping[str, Any]) -> dict[str, Any]:
    """A task's entry in results.json's ``clustered_stderr`` block."""
    return {
        **dict(stats["stderr"]),
        "clusters": stats["clusters"],
        "documents": stats["documents"],
        "cluster_key": stats["cluster_key"],
    }


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _is_mean(values: list[Any], reported: Any) -> bool:
    return _number(reported) and math.isclose(sum(map(float, values)) / len(values), float(reported), abs_tol=1e-9)
