"""One task's numbers: every ``(metric, filter)`` aggregated over documents, with its stderr.

:func:`aggregate_task` is lm-eval's ``_compute_task_aggregations``. It sits above both
:mod:`~evalflow.scoring.metric_functions` (which metric a per-document key belongs to) and
:mod:`~evalflow.scoring.aggregations` (the functions that turn values into one number), so
imports point one way: ``task_aggregation → metrics → aggregations → registry``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from evalflow.errors import DataError
from evalflow.scoring import lazy_numpy as np
from evalflow.scoring.aggregations import SLOW_METRICS, stderr_fn
from evalflow.scoring.bootstrap import mean
from evalflow.scoring.metric_functions import metric_for_key, task_metric_specs
from evalflow.taskspec.format.spec import TaskConfig

log = logging.getLogger(__name__)


def aggregate_task(
    task: TaskConfig,
    per_filter: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    bootstrap_iters: int = 100000,
) -> tuple[dict[str, Any], dict[str, bool | None]]:
    """One task's numbers from its per-document metric dicts, in lm-eval's layout and order.

    ``per_filter[name]`` holds, per document, the dict :func:`~evalflow.scoring.process.score_document`
    returned under filter pipeline ``name``. Returns ``({"acc,none": .., "acc_stderr,none": ..},
    {"acc": True})``. Raises :class:`~evalflow.errors.DataError` on no documents rather than
    reporting a score for nothing.

    >>> from evalflow.taskspec.format.spec import TaskConfig
    >>> task = TaskConfig(task="demo", output_type="multiple_choice")
    >>> aggregate_task(task, {"none": [{"acc": 1.0, "acc_norm": 0.0}, {"acc": 0.0, "acc_norm": 0.0}]})[0]
    {'acc,none': 0.5, 'acc_stderr,none': 0.5, 'acc_norm,none': 0.0, 'acc_norm_stderr,none': 0.0}
    """
    name = task.task
    if not per_filter:
        raise DataError(f"task '{name}' has no filter pipeline results to aggregate; nothing was scored")
    specs = task_metric_specs(task)
    out: dict[str, Any] = {}
    higher: dict[str, bool | None] = {n: s.higher_is_better for s in specs for n in s.output_names}
    for filter_name, rows in per_filter.items():
        if len(rows) == 0:
            raise DataError(
                f"task '{name}', filter '{filter_name}': no documents were scored, so there is nothing "
                "to aggregate; check the split, --limit and process_docs of the task"
            )
        raw = _collect(rows)
        for metric, items in raw.items():
            spec = metric_for_key(specs, metric, raw.keys(), process_results=task.process_results)
            agg = spec.aggregation if spec is not None else mean
            if spec is None:
                log.warning("[%s] no aggregation defined for metric %s; using mean", name, metric)
            elif metric not in higher:
                higher[metric] = spec.higher_is_better
            iters = min(bootstrap_iters, 100) if metric in SLOW_METRICS else bootstrap_iters
            out[f"{metric},{filter_name}"] = _plain(agg(items))
            fn = stderr_fn(agg, iters) if isinstance(bootstrap_iters, int) else None
            out[f"{metric}_stderr,{filter_name}"] = _plain(fn(items)) if fn and len(items) > 1 else "N/A"
    return out, higher


def _collect(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Per metric, its values over documents, metrics in order of first appearance (lm-eval's order)."""
    raw: dict[str, list[Any]] = {}
    for row in rows:
        for metric, value in row.items():
            raw.setdefault(metric, []).append(value)
    return raw


def _plain(value: Any) -> Any:
    """numpy scalars to Python numbers, so results stay JSON data."""
    return value.item() if isinstance(value, np.generic) else value
