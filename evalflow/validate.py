"""``python -m evalflow validate``: check task configs before spending model time on them.

    python -m evalflow validate task=my_task include_path=[my_tasks]
    python -m evalflow validate task=mmlu n=1 data_map=shared        # every subject

For each selected task: its YAML resolves (includes, groups, ``!function`` references), its
metrics and aggregations and its filters exist with the options given, every ``!function`` it
names imports (the load-time checks of :mod:`evalflow.load_checks`, which a run makes too), and its
templates render on the first ``n`` documents (default 3): the prompts and requests through the
run's own stages (as :mod:`evalflow.preview` shows them), plus each document's target, choices and
(``should_decontaminate``) decontamination query. Every task is checked; each failure is printed
as the usual one-paragraph error, and the exit code is 2 if any task failed, else 0. Load-time
warnings (a literal ``\\n`` in a YAML, a ``num_fewshot`` a task ignores) are printed first. Settings
are a run's ``key=value`` overrides; no model is loaded.
"""

from __future__ import annotations

import sys
from typing import Any

from evalflow.errors import EvalflowError
from evalflow import load_checks
from evalflow.preview import preview_settings, prompt_outputs
from evalflow.settings import RunSettings
from evalflow.taskspec.format.spec import TaskConfig

USAGE = "usage: python -m evalflow validate task=NAME|task=[A,B] [n=3] [any run setting=value ...]"


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE + "\n\n" + (__doc__ or "").strip())
        return 0
    from evalflow.app import select_tasks
    from evalflow.cache.store import CacheStore

    settings, n = preview_settings(argv, "validate")
    # unknown names, bad YAML, untrusted code: the usual error; the load-time checks run per task below
    selection = select_tasks(settings, checked=False)
    for line in load_checks.load_warnings(selection.tasks, settings.num_fewshot):
        print(f"evalflow: warning: {line}", file=sys.stderr)
    store = CacheStore(settings.cache_dir)
    failed = 0
    try:
        for task in selection.tasks:
            try:
                summary = check_task(task, settings, store, n)
            except EvalflowError as exc:
                failed += 1
                print(f"evalflow: error: {_located(exc, task)}", file=sys.stderr)
            else:
                print(f"ok  {task.task}: {summary}")
    finally:
        store.close()
    if failed:
        print(f"{failed} of {len(selection.tasks)} task(s) failed validation", file=sys.stderr)
        return 2
    return 0


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
    from evalflow.app import config_arguments
    from evalflow.judges import check_judges
    from evalflow.scoring.judge import render_judge_prompt
    from evalflow.scoring.metrics import judge_specs
    from evalflow.stages.judge_requests import gold

    check_judges([task], settings.judge_model, lambda config: config_arguments(config, settings))
    for spec in judge_specs(task):
        for doc_id in shown:
            target, choices = gold(task, docs[doc_id])
            render_judge_prompt(spec.prompt, docs[doc_id], str(target), target, choices,
                                where=f"task '{task.task}' ({task.source}) judge metric '{spec.metric}', document {doc_id}")


def _located(exc: EvalflowError, task: TaskConfig) -> str:
    text = str(exc)
    if f"'{task.task}'" in text or (task.source and task.source in text):
        return text
    return f"task '{task.task}' ({task.source or 'no file'}): {text}"
