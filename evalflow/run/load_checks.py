"""What can be known about the selected tasks before any model call, checked when they are loaded.

A run, ``show`` and ``validate`` all pass through here (``run_parts.select_tasks``) before a model exists:

* errors: every metric, aggregation and filter name resolves in its registry, and every
  ``!function`` a task names imports (a task module needing a missing package fails now, with the
  module and the package, not at the metrics stage after every answer was generated);
* warnings: literal ``\\n``/``\\t`` where a newline or tab was meant (:mod:`evalflow.taskspec.format.escapes`),
  tasks whose YAML pins ``num_fewshot: 0``, which a run's ``num_fewshot`` does not override
  (lm-eval 0.4.13's rule, :func:`evalflow.taskspec.prompts.fewshot_context.effective_num_fewshot`),
  and metrics a task's output type never computes (:func:`uncomputed_metrics`: lm-eval drops them
  without a word; the run does too, but says so).

    from evalflow.run.load_checks import check_selection
    check_selection(selection, num_fewshot=5)   # raises TaskError, logs the warnings
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from evalflow.errors import TaskError
from evalflow.output.run_paths import RESULTS
from evalflow.taskspec.catalog.selection import Selection
from evalflow.taskspec.format.escapes import LiteralEscape, literal_escapes
from evalflow.taskspec.format.loader import key_origin
from evalflow.taskspec.format.spec import FunctionRef, TaskConfig
from evalflow.taskspec.format.taskcode import keyed_function_refs, resolve_function

__all__ = ["check_selection", "check_task", "load_warnings", "uncomputed_metrics"]

log = logging.getLogger(__name__)

_SHOWN = 3  # names (or failing tasks) spelled out in one message before "and N more"


def check_selection(selection: Selection, num_fewshot: int | None) -> None:
    """Log the selection's warnings; raise one TaskError if any task or group cannot run."""
    for line in load_warnings(selection.tasks, num_fewshot):
        log.warning("%s", line)
    for task in selection.tasks:
        if num_fewshot is not None and task.num_fewshot != 0:
            log.info("Overwriting default num_fewshot of %s from %s to %s", task.task, task.num_fewshot, num_fewshot)
    failures: list[TaskError] = []
    for task in selection.tasks:
        try:
            check_task(task)
        except TaskError as exc:
            failures.append(exc)
    for group in selection.groups:
        for key, ref in keyed_function_refs(group.aggregate_metric_list, "aggregate_metric_list"):
            error = _import_error(ref, key, f"group '{group.name}' ({group.source})")
            failures += [error] if error else []
    if failures:
        raise _combined(failures, len(selection.tasks))


def check_task(task: TaskConfig) -> None:
    """Raise the first reason ``task`` cannot be scored, as one paragraph naming task, file and key."""
    from evalflow.scoring import task_metric_specs, task_pipelines  # registers the built-in names

    where = f"task '{task.task}' ({task.source or 'no file'})"
    for key, ref in keyed_function_refs(task):  # first: a metric's own `!function` is named by its key
        error = _import_error(ref, key, where)
        if error:
            raise error
    try:
        specs = task_metric_specs(task)
        pipelines = task_pipelines(task)
    except TaskError as exc:
        raise _located(exc, task) from exc
    _check_reductions(task, specs, pipelines, where)


def _check_reductions(task: TaskConfig, specs: Sequence[Any], pipelines: Sequence[Any], where: str) -> None:
    """A reduction scores each repeat alone, which a pipeline voting across repeats cannot give."""
    from evalflow.scoring.filter_functions import combines_samples

    reduced = [s.name for s in specs if s.reductions]
    voting = [p.name for p in pipelines if combines_samples(p)]
    if reduced and voting and task.repeats > 1:
        raise TaskError(
            f"{where}: metric_list gives {_names(reduced)} a reduction, which scores every repeat on its own, "
            f"but filter pipeline(s) {_names(voting)} combine repeats (majority_vote, take_first_k), so they "
            "have no per-repeat answers. Remove those pipelines (maj@k is the reduction's vote) or the "
            f"'reduction' keys ({key_origin(task.source, 'metric_list') if task.source else 'the task'})."
        )


def load_warnings(tasks: Sequence[TaskConfig], num_fewshot: int | None) -> list[str]:
    """The warnings for ``tasks``, one per problem (a template shared by many tasks warns once)."""
    out = _escape_warnings(tasks) + [line for task in tasks if (line := _uncomputed_warning(task))]
    pinned = [t.task for t in tasks if t.num_fewshot == 0]
    if num_fewshot and pinned:  # lm-eval's message (it logs it at info level), and what it means here
        its, it = ("its", "it") if len(pinned) == 1 else ("their", "them")
        out.append(
            f"num_fewshot has been set to 0 for {_names(pinned)} in {its} config. Manual configuration "
            f"will be ignored: num_fewshot={num_fewshot} does not apply to {it}, as in lm-eval 0.4.13 "
            f"({its} prompts have no few-shot examples and {RESULTS} records n-shot 0)."
        )
    return out


def uncomputed_metrics(task: TaskConfig) -> list[str]:
    """The ``metric_list`` names that ``task``'s output type never computes: lm-eval 0.4.13 builds a
    loglikelihood, loglikelihood_rolling or multiple_choice task's values from a fixed set
    (:data:`evalflow.scoring.process.COMPUTED`), so any other metric, a ``!function`` one included,
    is never called and reports nothing. None with ``process_results``, which returns every value."""
    from evalflow.judges.judge_spec import is_judge_entry
    from evalflow.scoring.process import COMPUTED
    from evalflow.scoring.registry import METRICS

    computed = COMPUTED.get(task.output_type)
    if computed is None or task.process_results is not None or task.metric_list is None:
        return []
    out = []
    for (
        entry
    ) in task.metric_list:  # what check_task refuses (no 'metric', a judge here, an unknown name) is not named twice
        raw = entry.get("metric") if isinstance(entry, Mapping) and not is_judge_entry(entry) else None
        if isinstance(raw, str) and METRICS.find(raw) is None:
            continue
        name = raw.attr.rsplit(".", 1)[-1] if isinstance(raw, FunctionRef) else getattr(raw, "__name__", raw)
        if isinstance(name, str) and name not in computed:
            out.append(name)
    return out


def _uncomputed_warning(task: TaskConfig) -> str | None:
    """One line naming ``task``'s :func:`uncomputed_metrics`, why, and the fix; None when there are none."""
    from evalflow.scoring.process import COMPUTED

    names = uncomputed_metrics(task)
    if not names:
        return None
    origin = key_origin(task.source, "metric_list") if task.source else None
    where = f"{task.source or 'no file'}{f', metric_list in {origin}' if origin and origin != task.source else ''}"
    them = "it" if len(names) == 1 else "them"
    return (
        f"task '{task.task}' ({where}): {_names(names, 'metric')} of its metric_list will not be computed: "
        f"output_type {task.output_type} computes only {', '.join(COMPUTED[task.output_type])}, and lm-eval "
        f"0.4.13 drops any other metric of such a task the same way, so the results have no value for {them}. "
        f"To score {them}, use output_type: generate_until, or a process_results function that returns {them}."
    )


def _escape_warnings(tasks: Iterable[TaskConfig]) -> list[str]:
    by_place: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    findings: dict[tuple[str, str, str], LiteralEscape] = {}
    for task in tasks:
        for finding in literal_escapes(task):
            place = (key_origin(task.source, finding.key.split(".")[0]), finding.key, finding.value)
            by_place[place].append(task.task)
            findings[place] = finding
    return [findings[place].message(_names(names, "task"), place[0]) for place, names in by_place.items()]


def _import_error(ref: FunctionRef, key: str, where: str) -> TaskError | None:
    """None if the ``!function`` at ``key`` imports and resolves, else its error, located."""
    try:
        resolve_function(ref)
    except TaskError as exc:
        return TaskError(f"{where}: `{key}` names task code that cannot be loaded: {exc}")
    return None


def _located(exc: TaskError, task: TaskConfig) -> TaskError:
    """``exc`` with the task and its file in front, unless it already names them."""
    text = str(exc)
    if f"'{task.task}'" in text or (task.source and task.source in text):
        return exc
    return TaskError(f"task '{task.task}' ({task.source or 'no file'}): {text}")


def _combined(failures: list[TaskError], total: int) -> TaskError:
    """The first failure's paragraph, then how many more tasks fail and where to see each."""
    if len(failures) == 1:
        return failures[0]
    return TaskError(
        f"{failures[0]} (And {len(failures) - 1} more of the {total} selected task(s) cannot run; "
        "`python -m evalflow validate` with the same settings lists each.)"
    )


def _names(names: Sequence[str], noun: str = "") -> str:
    label = f"{noun}s " if noun and len(names) > 1 else f"{noun} " if noun else ""
    shown = ", ".join(f"'{n}'" for n in names[:_SHOWN])
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return f"{label}{shown}{more}"
