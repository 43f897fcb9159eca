"""A task's judge metrics: which tasks have one, and each one's resolved judge.

A judge metric is a ``metric_list`` entry with a ``judge:`` block. :func:`judge_metric` is the one
function the scoring room calls for it: scoring resolves every entry of a task's ``metric_list``
(:func:`evalflow.scoring.metric_functions.task_metric_specs`) and, for a judge entry, takes its
:class:`~evalflow.judges.judge_spec.JudgeSpec` from here, adding the aggregation and reductions
an entry of any metric has. The pipeline asks :func:`has_judges` which tasks run the judge stages,
and the stages, the judge models and the load checks read :func:`judge_specs`: the same entries
resolved by the same function, so both rooms see one judge.
"""

from __future__ import annotations

from typing import Any

from evalflow.errors import TaskError
from evalflow.judges.judge_spec import JudgeSpec, is_judge_entry, parse_judge
from evalflow.taskspec.format.spec import TaskConfig


def has_judges(task: TaskConfig) -> bool:
    """Whether the task has a judge metric (a ``metric_list`` entry with a ``judge:`` block)."""
    return isinstance(task.metric_list, (list, tuple)) and any(is_judge_entry(m) for m in task.metric_list)


def judge_metric(task: TaskConfig, entry: Any, where: str) -> JudgeSpec | None:
    """The judge of ``metric_list`` entry ``entry`` (None: not a judge entry), or one TaskError
    naming ``where``, the metric and the fix: a judge metric grades generated text, under a name."""
    if not is_judge_entry(entry):
        return None
    name = entry.get("metric")
    if not isinstance(name, str) or not name:
        raise TaskError(f"{where}: a judge metric's 'metric' is the name its value is reported under; got {name!r}")
    if task.output_type != "generate_until" or task.process_results is not None:
        raise TaskError(
            f"{where}: judge metric '{name}' grades generated text, so it needs output_type: generate_until "
            f"and no process_results (the task has output_type {task.output_type!r}"
            f"{' and process_results' if task.process_results is not None else ''})"
        )
    return parse_judge(name, entry["judge"], where, task.source)


def judge_specs(task: TaskConfig) -> tuple[JudgeSpec, ...]:
    """The task's judge metrics, in metric_list order (each entry named as scoring names it)."""
    entries = task.metric_list if isinstance(task.metric_list, (list, tuple)) else ()
    found = (judge_metric(task, entry, task.where(f"metric_list[{i}]")) for i, entry in enumerate(entries))
    return tuple(spec for spec in found if spec is not None)
