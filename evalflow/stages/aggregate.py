"""Stage 7: one task's numbers: each metric aggregated over documents, with its standard error;
for judge metrics also how many judge answers did not parse (``helpful_unparsed,none``), and a
judge result that no document has a value for as ``None`` (:func:`~evalflow.judges.judge_results.judge_results`)."""

from __future__ import annotations

from evalflow.core.records import Scores, TaskResult
from evalflow.judges.judge_results import judge_results
from evalflow.scoring.metric_functions import task_metric_specs
from evalflow.scoring.task_aggregation import aggregate_task
from evalflow.taskspec.format.spec import TaskConfig


def aggregate(task: TaskConfig, scores: Scores, bootstrap_iters: int) -> TaskResult:
    values, higher_is_better = aggregate_task(task, scores.by_filter, bootstrap_iters=bootstrap_iters)
    judged, fewer_is_better = judge_results(task_metric_specs(task), scores)  # counts, and results with no value
    values.update(judged)
    higher_is_better.update(fewer_is_better)
    n = {name: len(rows) for name, rows in scores.by_filter.items()}
    return TaskResult(task=task.task, metrics=values, higher_is_better=higher_is_better, n_samples=n)
