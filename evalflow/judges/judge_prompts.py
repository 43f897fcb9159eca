"""The judge's requests: one per judge metric, document and *distinct* answer to grade.

One request per judge metric, document and distinct filtered answer (every pipeline's answer and,
with repeats, every sample's): the judge prompt rendered from ``doc``, ``response`` and ``target``
(and ``choices``), with the judge's gen_kwargs. The request holds nothing else, so the per-request
cache keys a judge call by the judge model's identity, the rendered prompt and the gen_kwargs only:
an unchanged answer is never judged twice, a changed one is, and a rubric edit re-asks the judge
without touching the scored model. :func:`judge_requests_for` is what the ``judge_requests``
stage runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import jinja2

from evalflow.core.records import DocSet, Filtered, JudgeItem, JudgeRequests, Request
from evalflow.errors import DataError, TaskError
from evalflow.taskspec.format.spec import TaskConfig
from evalflow.taskspec.prompts.templates import _compile, doc_to_choice, doc_to_target


def judge_requests_for(
    task: TaskConfig, rubrics: Iterable[Mapping[str, Any]], docs: DocSet, filtered: Filtered
) -> JudgeRequests:
    """The judge requests of ``task``'s answers; ``rubrics``: each judge's ``{metric, prompt,
    gen_kwargs}`` (:meth:`~evalflow.judges.judge_spec.JudgeSpec.request_part`)."""
    items: dict[tuple[str, int, str], JudgeItem] = {}
    for judge in rubrics:
        for doc_id, response in answers(filtered):
            key = (judge["metric"], doc_id, response)
            if key in items:
                continue
            doc = docs.docs[doc_id]
            prompt = render_judge_prompt(
                judge["prompt"],
                doc,
                response,
                *gold(task, doc),
                where=f"task '{task.task}' ({task.source or 'no file'}) judge metric '{judge['metric']}'",
            )
            items[key] = JudgeItem(
                judge["metric"], doc_id, response, Request("generate_until", (prompt, dict(judge["gen_kwargs"])))
            )
    return JudgeRequests(tuple(items.values()))


def answers(filtered: Filtered) -> Iterator[tuple[int, str]]:
    """(doc_id, answer text) of every pipeline's answer and every sample's, in document order."""
    for name, values in filtered.by_filter.items():
        samples = filtered.by_sample.get(name, ())
        for i, (doc_id, _) in enumerate(filtered.keys):
            yield doc_id, first_text(values[i])
            if samples:
                yield from ((doc_id, first_text(answer)) for answer in samples[i])


def first_text(value: Any) -> str:
    """The text graded for an answer: the answer itself, or the first of a list of answers (a
    pipeline without take_first)."""
    while isinstance(value, (list, tuple)) and value:
        value = value[0]
    return value if isinstance(value, str) else str(value)


def gold(task: TaskConfig, doc: Mapping[str, Any]) -> tuple[Any, Any]:
    """(target, choices) as a judge reads them: a choice task's target is the choice's text."""
    target = doc_to_target(task, doc)
    choices = doc_to_choice(task, doc) if task.doc_to_choice is not None else None
    if choices is not None and isinstance(target, int) and 0 <= target < len(choices):
        target = choices[target]
    return target, choices


def render_judge_prompt(
    template: str, doc: Mapping[str, Any], response: str, target: Any, choices: Any, *, where: str
) -> str:
    """The judge prompt for one answer (lm-eval's sandboxed Jinja environment, strict undefined)."""
    try:
        return _compile(template).render(doc=doc, response=response, target=target, choices=choices)
    except jinja2.UndefinedError as exc:
        raise TaskError(
            f"{where}: the judge prompt uses {exc.message}; the document's fields are {sorted(doc)} "
            "(write doc.FIELD). Fix the prompt."
        ) from None
    except Exception as exc:
        raise DataError(f"{where}: rendering the judge prompt failed with {type(exc).__name__}: {exc}") from None
