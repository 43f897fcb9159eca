"""A task's judge metrics: which tasks have one, and each one's resolved judge.

A judge metric is a ``metric_list`` entry with a ``judge:`` block; :mod:`evalflow.scoring.metric_functions`
resolves it into a :class:`~evalflow.scoring.metric_functions.MetricSpec` whose ``judge`` is the
:class:`~evalflow.judges.judge_spec.JudgeSpec` parsed from that block. The pipeline asks
:func:`has_judges` which tasks run the judge stages, and the stages, the judge models and the
load checks read :func:`judge_specs`.
"""

from __future__ import annotations

from evalflow.judges.judge_spec import JudgeSpec, is_judge_entry
from evalflow.scoring.metric_functions import task_metric_specs
from evalflow.taskspec.format.spec import TaskConfig


def has_judges(task: TaskConfig) -> bool:
    """Whether the task has a judge metric (a ``metric_list`` entry with a ``judge:`` block)."""
    return isinstance(task.metric_list, (list, tuple)) and any(is_judge_entry(m) for m in task.metric_list)


def judge_specs(task: TaskConfig) -> tuple[JudgeSpec, ...]:
    """The task's judge metrics, in metric_list order."""
    return tuple(s.judge for s in task_metric_specs(task) if s.judge is not None)
