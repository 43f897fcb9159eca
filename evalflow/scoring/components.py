"""Which registered components each scoring stage calls, with the hash of their code.

A task names its metrics, aggregations and filters; the registries map each name to code that may
be the user's (``register_metric``) or evalflow's own. These functions are the scoring stages'
``identity`` entries in :mod:`evalflow.dag.pipeline`: by name and :func:`~evalflow.cache.code.code_hash`,
so an edit to a component's module re-runs exactly the stages that call it, and ``explain`` can
say ``metric 'contains_answer' code changed``. They read names only and resolve no ``!function``
(whose source hash is already part of the task field that holds it), so planning imports no task
code; a name the registries do not know, or a malformed list, is left to the stage, which
reports it.

    >>> from evalflow.taskspec.format.spec import TaskConfig
    >>> sorted(aggregation_components(TaskConfig(task="t", output_type="multiple_choice")))
    ["aggregation 'mean'", "metric 'acc'", "metric 'acc_norm'"]
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

from evalflow.cache.code import code_hash
from evalflow.judges.parsers import judge_parser
from evalflow.scoring.filter_functions import DEFAULT_PIPELINES, filter_names, task_code_filters
from evalflow.scoring.metric_functions import DEFAULT_METRICS  # (imports the reductions, which register themselves)
from evalflow.scoring.registry import AGGREGATIONS, FILTERS, METRICS, REDUCTIONS
from evalflow.taskspec.format.installed import code_fingerprint
from evalflow.taskspec.format.spec import FunctionRef, TaskConfig


def filter_components(task: TaskConfig) -> dict[str, Any]:
    """The registered filters (functions or lm-eval Filter classes) the task's pipelines run.

    A filter class the task's code registered in lm-eval's registry (a name evalflow's registry
    lacks) is keyed by its code and by its module's identity as task code (the file, and for an
    installed package its distribution's version: what a ``!function`` there is keyed by); finding
    it imports the task's code, which only such tasks need at planning time.
    """
    if task.filter_list is None:
        return {f"filter '{s.function}'": code_hash(s.fn) for p in DEFAULT_PIPELINES for s in p.steps}
    out: dict[str, Any] = {}
    bridged = task_code_filters(task)
    for name in filter_names(task.filter_list):
        found = FILTERS.find(name) if isinstance(name, str) else None
        if found is not None:
            out[f"filter '{name}'"] = code_hash(found)
        elif isinstance(name, str) and name in bridged:
            out[f"filter '{name}'"] = _task_code_identity(bridged[name])
    return out


def _task_code_identity(cls: type) -> dict[str, str]:
    path = inspect.getsourcefile(cls)
    module = code_fingerprint(path) if path and os.path.isfile(path) else None
    return {"lm-eval registry": cls.__qualname__, "module": module or "", "code": code_hash(cls)}


def metric_components(task: TaskConfig) -> dict[str, str]:
    """The registered metric functions the metrics stage may call (none under process_results,
    which computes every metric itself), and the reductions it applies to them."""
    out = reduction_components(task)
    if task.process_results is not None:
        return out
    for name, entry in _metrics(task):
        metric = METRICS.find(name) if isinstance(entry.get("metric", name), str) else None
        if metric is not None and "judge" not in entry:
            out[f"metric '{name}'"] = code_hash(metric.fn)
        parser = judge_parser(entry)
        if parser is not None:
            out[f"judge parser '{parser[0]}'"] = code_hash(parser[1])
    return out


def reduction_components(task: TaskConfig) -> dict[str, str]:
    """The registered reductions the task's ``reduction`` keys name (``pass@4`` is ``pass@k``'s code)."""
    out: dict[str, str] = {}
    for _, entry in _metrics(task):
        names = entry.get("reduction", ())
        for name in [names] if isinstance(names, str) else names if isinstance(names, (list, tuple)) else ():
            registered = re.sub(r"@[0-9]+$", "@k", name) if isinstance(name, str) else None
            found = REDUCTIONS.find(registered) if registered else None
            if found is not None:
                out[f"reduction '{registered}'"] = code_hash(found)
    return out


def aggregation_components(task: TaskConfig) -> dict[str, Any]:
    """The aggregations the aggregate stage calls, and what it takes from a metric's registration
    (its default aggregation and direction) where the task's ``metric_list`` entry does not say."""
    out: dict[str, Any] = {}
    for name, entry in _metrics(task):
        metric = METRICS.find(name)
        defaults = {k: getattr(metric, k) for k in ("aggregation", "higher_is_better") if metric and k not in entry}
        if defaults:
            out[f"metric '{name}'"] = defaults
        agg = entry.get("aggregation", defaults.get("aggregation"))
        found = AGGREGATIONS.find(agg) if isinstance(agg, str) else None
        if found is not None:
            out[f"aggregation '{agg}'"] = code_hash(found)
    return out


def _metrics(task: TaskConfig) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each metric's name (a ``!function`` metric: its function's name, under which lm-eval looks
    up registered defaults) and its ``metric_list`` entry; lm-eval's defaults without a list."""
    if task.metric_list is None:
        yield from ((name, {}) for name in DEFAULT_METRICS.get(task.output_type, ()))
        return
    for entry in task.metric_list if isinstance(task.metric_list, (list, tuple)) else ():
        if isinstance(entry, Mapping) and "metric" in entry:
            raw = entry["metric"]
            name = raw.attr.rpartition(".")[2] if isinstance(raw, FunctionRef) else getattr(raw, "__name__", raw)
            if isinstance(name, str):
                yield name, entry
