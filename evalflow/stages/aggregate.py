"""Stage 7: one task's numbers: each metric aggregated over documents, with its standard error;
for judge metrics also how many judge answers did not parse (``helpful_unparsed,none``), and a
judge result that no document has a value for as ``None`` (:func:`~evalflow.judges.verdicts.judge_gaps`)."""

from __future__ import annotations

from evalflow.core.records import Scores, TaskResult
from evalflow.judges.verdicts import judge_gaps, unparsed_counts
from evalflow.scoring.metric_functions import task_metric_specs
from evalflow.scoring.task_aggregation import aggregate_task
from evalflow.taskspec.format.spec import TaskConfig


def aggregate(task: TaskConfig, scores: Scores, bootstrap_iters: int) -> TaskResult:
    values, higher_is_better = aggregate_task(task, scores.by_filter, bootstrap_iters=bootstrap_iters)
    unparsed = unparsed_counts(scores)  # judge metrics: `<metric>_unparsed,<filter>`, never hidden
    gaps = judge_gaps(task_metric_specs(task), scores)  # a result with no value is null, not absent
    values.update(gaps)
    values.update(unparsed)
    counts = [*unparsed, *(key for key in gaps if key.split(",", 1)[0].endswith("_excluded"))]
    higher_is_better.update({key.split(",", 1)[0]: False for key in counts})  # fewer is better
    n = {name: len(rows) for name, rows in scores.by_filter.items()}
    return TaskResult(task=task.task, metrics=values, higher_is_better=higher_is_better, n_samples=n)
