"""Stage 7: one task's numbers: each metric aggregated over documents, with its standard error."""

from __future__ import annotations

from evalflow.records import Scores, TaskResult
from evalflow.scoring.task_aggregation import aggregate_task
from evalflow.taskspec.spec import TaskConfig


def aggregate(task: TaskConfig, scores: Scores, bootstrap_iters: int) -> TaskResult:
    values, higher_is_better = aggregate_task(task, scores.by_filter, bootstrap_iters=bootstrap_iters)
    n = {name: len(rows) for name, rows in scores.by_filter.items()}
    return TaskResult(task=task.task, metrics=values, higher_is_better=higher_is_better, n_samples=n)
