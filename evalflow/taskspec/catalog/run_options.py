"""Run options that change the selected tasks themselves: lm-eval's ``--predict_only``, ``--metadata``
and the task names of ``--samples``.

``metadata`` is lm-eval's ``TaskManager(metadata=...)``: merged over every task's and group's own
``metadata`` (the run's keys win), so a ``custom_dataset`` function receives it as keyword arguments
(RULER's ``max_seq_lengths``) and results.json's ``configs`` show it.

``predict_only`` is lm-eval's ``task.override_metric("bypass")``: every task's metric list becomes
the single metric ``bypass`` (no scoring; it aggregates to lm-eval's placeholder 999) and its
``process_results`` is dropped, so responses are generated, filtered and logged, never scored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from evalflow.errors import ConfigError, closest
from evalflow.taskspec.catalog.index import Selection
from evalflow.taskspec.format.spec import TaskConfig

BYPASS: tuple[Mapping[str, str], ...] = ({"metric": "bypass"},)


def apply_run_options(
    selection: Selection,
    *,
    samples: Mapping[str, tuple[int, ...]] | None,
    predict_only: bool,
    metadata: Mapping[str, Any] | None = None,
) -> Selection:
    """The selection with ``metadata`` and ``predict_only`` applied; refuses ``samples`` naming a task
    not selected (lm-eval ignores it silently, so a typo would evaluate the whole task)."""
    names = [t.task for t in selection.tasks]
    for name in samples or {}:
        if name not in names:
            raise ConfigError(
                f"samples names the task '{name}', which this run does not evaluate; {closest(name, names)} "
                "Key samples by the names of the run's tasks (a group's member tasks, not the group)."
            )
    if metadata:
        selection = Selection(
            tuple(dataclasses.replace(t, metadata={**(t.metadata or {}), **metadata}) for t in selection.tasks),
            tuple(dataclasses.replace(g, metadata={**(g.metadata or {}), **metadata}) for g in selection.groups),
        )
    if not predict_only:
        return selection
    return dataclasses.replace(selection, tasks=tuple(predicting(t) for t in selection.tasks))


def predicting(task: TaskConfig) -> TaskConfig:
    """``task`` with its metrics bypassed (lm-eval's ``override_metric("bypass")``)."""
    return dataclasses.replace(task, metric_list=BYPASS, process_results=None)
