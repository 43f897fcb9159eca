"""Scoring: filters, per-document metrics, aggregation and group scores, as in lm-eval 0.4.13.

Lives here: filters, metrics, reductions, aggregations, bootstrap, group scores, the component registry.
May import ``errors`` … ``judges`` (the rooms below it in docs/architecture.md); never ``stages`` or ``dag``.

The pipeline after inference, for one task::

    pipelines = task_pipelines(task)                             # filters
    filtered = pipeline.apply(resps, docs)                       # per lm-eval instance
    row = score_document(task, doc, results, target=..., choices=...)   # per document
    numbers, higher = aggregate_task(task, {"none": rows})      # per task
    group = aggregate_group("mmlu", aggregate_metric_list, [(numbers, n), ...])

Components are registered by name (the name used in task YAML); add your own with
:func:`register_metric`, :func:`register_aggregation`, :func:`register_filter` and
:func:`register_reduction` (how a document's repeats become one value: pass@k, maj@k, ...).
Importing this package registers every built-in component. Judge parsers (how a judge model's
answer becomes a score) are registered in :mod:`evalflow.judges.parsers`.
"""

from evalflow.scoring import (
    code_exec,  # noqa: F401  (registers pass_at_k, pass_at_1: sandboxed code execution)
    filters_tagging,  # noqa: F401  (registers regex_pos, format_span)
)
from evalflow.scoring.filter_functions import FilterPipeline, FilterStep, build_pipelines, task_pipelines
from evalflow.scoring.group_scores import aggregate_group
from evalflow.scoring.metric_functions import DEFAULT_METRICS, MetricSpec, task_metric_specs
from evalflow.scoring.process import score_document
from evalflow.scoring.reductions import RepeatSamples, pass_at_k
from evalflow.scoring.registry import (
    AGGREGATIONS,
    FILTERS,
    METRICS,
    REDUCTIONS,
    Metric,
    Registry,
    register_aggregation,
    register_filter,
    register_metric,
    register_reduction,
)
from evalflow.scoring.task_aggregation import aggregate_task

__all__ = [
    "AGGREGATIONS",
    "DEFAULT_METRICS",
    "FILTERS",
    "METRICS",
    "REDUCTIONS",
    "FilterPipeline",
    "FilterStep",
    "Metric",
    "MetricSpec",
    "Registry",
    "RepeatSamples",
    "aggregate_group",
    "aggregate_task",
    "build_pipelines",
    "pass_at_k",
    "register_aggregation",
    "register_filter",
    "register_metric",
    "register_reduction",
    "score_document",
    "task_metric_specs",
    "task_pipelines",
]
