"""What ``python -m evalflow validate`` checks of a task before model time is spent on it: the
load-time checks of :mod:`evalflow.run.load_checks`, which a run makes too, the metrics and filters it
names, its templates rendered on the first documents through the run's own stages
(:mod:`evalflow.run.preview`), and its judges' prompts. What a run accepts but scores in a way the
author cannot have meant (a metric its output type never computes, a label outside its choices)
is a warning: the task runs, as in lm-eval 0.4.13, and validate says what to fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalflow.config.schema import RunSettings
from evalflow.errors import EvalflowError
from evalflow.run import load_checks
from evalflow.run.preview import prompt_outputs
from evalflow.taskspec.format.spec import TaskConfig


@dataclass(frozen=True)
class Checked:
    """A task that can run: a one-line summary, and what it will score other than meant."""

    summary: str
    warnings: tuple[str, ...] = ()  # this task's documents' problems, one line each
    uncomputed: tuple[str, ...] = ()  # metrics never computed (the load-time warning names them)

    @property
    def clean(self) -> bool:
        return not self.warnings and not self.uncomputed


def check_task(task: TaskConfig, settings: RunSettings, store: object, n: int) -> Checked:
    """Raise the task's first problem as an EvalflowError; else its summary and warnings."""
    from evalflow.scoring import task_metric_specs, task_pipelines
    from evalflow.taskspec.data.decontamination import decontamination_query
    from evalflow.taskspec.prompts.clusters import cluster_ids
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
    cluster_ids(task, docs)  # every document's cluster id renders (a run checks all of them too)
    requests = sum(1 for inst in outputs["instances"] if inst.doc_id in set(shown))
    uncomputed = load_checks.uncomputed_metrics(task)
    names = [m.name + (" (not computed)" if m.name in uncomputed else "") for m in metrics]
    summary = (
        f"{len(shown)} document(s) render ({requests} requests); metrics "
        f"{', '.join(names)}; filters {', '.join(p.name for p in pipelines)}"
    )
    return Checked(summary, tuple(_label_warnings(task, outputs["load_docs"], shown)), tuple(uncomputed))


def located(exc: EvalflowError, task: TaskConfig) -> str:
    """The error's paragraph, prefixed with the task and its file unless it names them already."""
    text = str(exc)
    if f"'{task.task}'" in text or (task.source and task.source in text):
        return text
    return f"task '{task.task}' ({task.source or 'no file'}): {text}"


def _label_warnings(task: TaskConfig, docs: Any, shown: list[int]) -> list[str]:
    """A multiple_choice document whose gold is not one of its choices, which lm-eval (and a run)
    logs and scores as wrong whatever the model answers."""
    from evalflow.scoring.process import gold_index
    from evalflow.taskspec.prompts.fewshot_context import is_multiple_input
    from evalflow.taskspec.prompts.templates import doc_to_choice, doc_to_target, doc_to_text

    if task.output_type != "multiple_choice" or task.process_results is not None or task.doc_to_choice is None:
        return []
    gold_of = doc_to_text if is_multiple_input(task, docs) else doc_to_target  # winogrande: the context's index
    out = []
    for doc_id in shown:
        gold, choices = gold_of(task, docs.docs[doc_id]), doc_to_choice(task, docs.docs[doc_id])
        if gold_index(gold, choices)[1]:
            out.append(
                f"task '{task.task}' ({task.source or 'no file'}), document {doc_id}: its label {gold!r} is not "
                f"within its {len(choices)} choices {choices!r} (an index 0-{len(choices) - 1} or a choice's text), "
                "so every answer scores as wrong (a run logs 'label index not within the available choices', "
                "as lm-eval does). Fix the document's label, or doc_to_target/doc_to_choice."
            )
    return out


def _check_judges(task: TaskConfig, settings: RunSettings, docs: Any, shown: list[int]) -> None:
    """A run's judge checks (each judge model resolves and can be built), and each judge prompt
    rendered on the shown documents, with the target standing in for the model's answer."""
    from evalflow.judges.judge_metrics import judge_specs
    from evalflow.judges.judge_models import check_judges
    from evalflow.judges.judge_prompts import gold, render_judge_prompt
    from evalflow.run.parts import config_arguments

    check_judges([task], settings.judge_model, lambda config: config_arguments(config, settings, judge=True))
    for spec in judge_specs(task):
        for doc_id in shown:
            target, choices = gold(task, docs[doc_id])
            render_judge_prompt(
                spec.prompt,
                docs[doc_id],
                str(target),
                target,
                choices,
                where=f"task '{task.task}' ({task.source}) judge metric '{spec.metric}', document {doc_id}",
            )
