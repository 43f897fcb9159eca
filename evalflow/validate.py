"""What ``python -m evalflow validate`` checks of a task before model time is spent on it: the
load-time checks of :mod:`evalflow.load_checks`, which a run makes too, the metrics and filters it
names, its templates rendered on the first documents through the run's own stages
(:mod:`evalflow.preview`), and its judges' prompts.
"""

from __future__ import annotations

from typing import Any

from evalflow import load_checks
from evalflow.preview import prompt_outputs
from evalflow.settings import RunSettings
from evalflow.taskspec.format.spec import TaskConfig


def check_task(task: TaskConfig, settings: RunSettings, store: object, n: int) -> str:
    """Raise the task's first problem as an EvalflowError; else a one-line summary."""
    from evalflow.scoring import task_metric_specs, task_pipelines
    from evalflow.taskspec.data.decontamination import decontamination_query
    from evalflow.taskspec.prompts.templates import doc_to_choice, doc_to_target

    load_checks.check_task(task)  # what a run checks at load time: registry names, every `!function` imports
    metrics = task_metric_specs(task)
    pipelines = task_pipelines(task)
    outputs = prompt_outputs(task, settings, store)
    docs = outputs["load_docs"].docs
    shown = [ctx.doc_id for ctx in outputs["fewshot"][:n]]
    for doc_id in shown:
        doc_to_target(task, docs[doc_id], doc_id=doc_id)
        if task.doc_to_choice is not None:
            doc_to_choice(task, docs[doc_id], doc_id=doc_id)
        decontamination_query(task, docs[doc_id], doc_id=doc_id)
    _check_judges(task, settings, docs, shown)
    requests = sum(1 for inst in outputs["instances"] if inst.doc_id in set(shown))
    return (f"{len(shown)} document(s) render ({requests} requests); metrics "
            f"{', '.join(m.name for m in metrics)}; filters {', '.join(p.name for p in pipelines)}")


def _check_judges(task: TaskConfig, settings: RunSettings, docs: Any, shown: list[int]) -> None:
    """A run's judge checks (each judge model resolves and can be built), and each judge prompt
    rendered on the shown documents, with the target standing in for the model's answer."""
    from evalflow.run_parts import config_arguments
    from evalflow.judges.metric import judge_specs
    from evalflow.judges.model import check_judges
    from evalflow.judges.spec import render_judge_prompt
    from evalflow.stages.judge_requests import gold

    check_judges([task], settings.judge_model, lambda config: config_arguments(config, settings))
    for spec in judge_specs(task):
        for doc_id in shown:
            target, choices = gold(task, docs[doc_id])
            render_judge_prompt(spec.prompt, docs[doc_id], str(target), target, choices,
                                where=f"task '{task.task}' ({task.source}) judge metric '{spec.metric}', document {doc_id}")
