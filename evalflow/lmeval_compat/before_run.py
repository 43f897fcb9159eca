"""What the front door does with a run's tasks before any model is built: ``--check_integrity``
(each task validated as ``python -m evalflow validate`` validates it) and ``--write_out`` (each
task's document 0 logged as lm-eval 0.4.13 logs it), both through the run's own stages and cache
with the dummy model, so a task that cannot run stops here and a later run reuses the prompts.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Mapping
from typing import Any

from evalflow.config.schema import RunSettings
from evalflow.errors import ConfigError, EvalflowError
from evalflow.lmeval_compat.translate import Translation
from evalflow.taskspec.catalog.index import Selection
from evalflow.taskspec.format.spec import TaskConfig

# the logger --write_out logs to; lm-eval's command line gives it lm-eval's handler (setup_logging)
WRITE_OUT_LOG = logging.getLogger("evalflow.lmeval_compat.write_out")
# lm-eval 0.4.13's log line (lm_eval.utils.setup_logging), with the place in lm-eval that logs it:
# print_writeout's two eval_logger.info calls, evaluator_utils.py lines 41 and 45
LM_EVAL_LOG_FORMAT = "%(asctime)s %(levelname)-8s [%(lm_eval_at)s] %(message)s"
LM_EVAL_DATE_FORMAT = "%Y-%m-%d:%H:%M:%S"
WRITE_OUT_AT = ("evaluator_utils:41", "evaluator_utils:45")
VALIDATE_DOCS = 3  # documents each task is rendered on: python -m evalflow validate's default n


def setup_logging(verbosity: str = "INFO") -> None:
    """lm-eval's ``setup_logging``: what the front door logs under lm-eval's names goes to stderr
    in lm-eval's format, at ``verbosity``, once (lm-eval's command line calls it at start, and
    simple_evaluate when given a verbosity; otherwise the caller's logging setup decides)."""
    WRITE_OUT_LOG.setLevel(verbosity.upper())
    if not WRITE_OUT_LOG.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(LM_EVAL_LOG_FORMAT, datefmt=LM_EVAL_DATE_FORMAT))
        WRITE_OUT_LOG.addHandler(handler)
        WRITE_OUT_LOG.propagate = False


def run_settings(tr: Translation, n: int) -> RunSettings:
    """The run's settings as its prompts see them, with the dummy model (no model is built: the
    model's keys and batch settings are left out) and ``limit`` ``n`` when the run gives none. The
    tasks they select are the run's (selection reads neither the model nor the limit)."""
    from evalflow.config.compose import compose_config
    from evalflow.config.settings import settings_from_config

    dropped = ("model.", "+model.", "model=", "log_samples=", "batch_size=", "max_batch_size=")
    overrides = ["model=dummy", f"task=[{','.join(tr.tasks)}]", *(o for o in tr.overrides if not o.startswith(dropped))]
    settings = settings_from_config(compose_config(overrides))
    if settings.limit is None and settings.samples is None:
        settings = dataclasses.replace(settings, limit=float(n))
    return settings


def selected_before_run(tr: Translation) -> Selection | None:
    """The run's tasks, selected once when something runs before the run (``--check_integrity``,
    ``--write_out``, enable_thinking's check) and handed to the run (``evaluate(selection=)``), so a
    trusted folder's code is announced once; unchecked (the run checks it, after integrity's own
    paragraphs). None when nothing runs before the run: the run selects its tasks itself."""
    from evalflow.run.parts import select_tasks

    thinking = bool(tr.lm_model_args.get("enable_thinking"))
    if not (tr.check_integrity or tr.write_out or thinking):
        return None
    return select_tasks(run_settings(tr, 1), checked=False)


def check_integrity(tr: Translation, selection: Selection) -> None:
    """``--check_integrity``: every task checked as ``python -m evalflow validate`` checks it (its
    YAML, metrics, filters, ``!function`` imports, prompts and targets on its first documents); the
    first that fails stops the run with validate's paragraph, before any model call."""
    from evalflow.cache.store import CacheStore
    from evalflow.run.validate_task import check_task, located

    settings = run_settings(tr, VALIDATE_DOCS)
    store = CacheStore(settings.cache_dir)
    try:
        for task in selection.tasks:
            try:
                checked = check_task(task, settings, store, VALIDATE_DOCS)
            except EvalflowError as exc:
                raise ConfigError(f"--check_integrity: {located(exc, task)}") from exc
            mark = "ok" if checked.clean else "warn"
            print(f"evalflow lm-eval: --check_integrity: {mark} {task.task}: {checked.summary}", file=sys.stderr)
            for line in checked.warnings:
                print(f"evalflow lm-eval: --check_integrity: warning: {line}", file=sys.stderr)
    finally:
        store.close()


def refuse_thinking_loglikelihood(tr: Translation, selection: Selection | None) -> None:
    """lm-eval's HFLM and VLLM refuse ``enable_thinking=True`` with a loglikelihood task (their
    ``loglikelihood`` raises, naming the tasks): the same paragraph here, before any model is built."""
    from evalflow.lmeval_compat.thinking_args import THINKING_PRESETS

    if selection is None or not (tr.lm_model_args.get("enable_thinking") and tr.preset in THINKING_PRESETS):
        return
    scored = sorted(t.task for t in selection.tasks if t.output_type != "generate_until")
    if scored:
        raise ConfigError(
            f"--model_args enable_thinking=True is not compatible with loglikelihood tasks, as in lm-eval (the "
            f"model's thinking is generated, and these tasks score given answers): {', '.join(scored)}. Run them "
            "without enable_thinking, or give only generate_until tasks."
        )


def log_first_prompts(tr: Translation, selection: Selection) -> None:
    """``--write_out``: each task's document 0, its prompt, target and first request, logged as
    lm-eval's ``print_writeout`` logs them, built from the run's own stages and cache."""
    from evalflow.cache.store import CacheStore
    from evalflow.run.parts import check_selected
    from evalflow.run.preview import prompt_outputs

    settings = run_settings(tr, 1)
    store = CacheStore(settings.cache_dir)
    try:
        for task in check_selected(selection, settings).tasks:
            for at, message in zip(
                WRITE_OUT_AT, writeout_messages(task, prompt_outputs(task, settings, store), settings)
            ):
                WRITE_OUT_LOG.info(message, extra={"lm_eval_at": at})
    finally:
        store.close()


def writeout_messages(task: TaskConfig, outputs: Mapping[str, Any], settings: RunSettings) -> tuple[str, ...]:
    """lm-eval's two write_out messages for the task's document 0 (none when the run's ``samples``
    leave it out, as lm-eval's ``doc_id < 1`` finds none): the task as lm-eval's ConfigurableTask
    prints itself (``num_samples``: the whole evaluation split), the first request's context and the
    target; then that request as lm-eval's ``Instance`` dataclass prints itself (one Instance for
    all of a document's ``repeats``)."""
    from evalflow.taskspec.prompts.fewshot_context import effective_num_fewshot
    from evalflow.taskspec.prompts.templates import doc_to_target

    first = next((inst for inst in outputs["instances"] if inst.doc_id == 0), None)
    if first is None:
        return ()
    docs = outputs["load_docs"].docs
    doc, request, name, repeats = docs[0], first.request, task.task, task.repeats
    shown = (
        f"ConfigurableTask(task_name={name},output_type={task.output_type},"
        f"num_fewshot={effective_num_fewshot(task, settings.num_fewshot)},num_samples={len(docs)})"
    )
    prompt = (
        f"Task: {shown}; document 0; context prompt (starting on next line):    \n{request.args[0]}\n"
        "(end of prompt on previous line)\ntarget string or answer choice index (starting on next line):\n"
        f"{doc_to_target(task, doc, doc_id=0)}\n(end of target on previous line)"
    )
    instance = (
        f"Instance(request_type={request.type!r}, doc={dict(doc)!r}, arguments={tuple(request.args)!r}, "
        f"idx={first.idx}, metadata=({name!r}, 0, {repeats}), resps=[], filtered_resps={{}}, "
        f"task_name={name!r}, doc_id=0, repeats={repeats})"
    )
    return (prompt, f"Request: {instance}")
