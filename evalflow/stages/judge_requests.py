"""Stage 5b (tasks with judge metrics): the judge model's request for each answer to grade.

The requests are built in the judges' room (:func:`evalflow.judges.judge_prompts.judge_requests_for`);
this stage hands it the node's projection of ``metric_list`` (each judge's rubric and gen_kwargs,
:func:`evalflow.dag.pipeline._judge_prompts`), so nothing else of a judge keys it.
"""

from __future__ import annotations

from evalflow.core.records import DocSet, Filtered, JudgeRequests
from evalflow.judges.judge_prompts import judge_requests_for
from evalflow.taskspec.format.spec import TaskConfig


def judge_requests(task: TaskConfig, docs: DocSet, filtered: Filtered) -> JudgeRequests:
    return judge_requests_for(task, task.metric_list or (), docs, filtered)
