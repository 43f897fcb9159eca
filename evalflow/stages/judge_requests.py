"""Stage 5b (tasks with judge metrics): the judge model's request for each answer to grade.

One request per judge metric, document and *distinct* filtered answer (every pipeline's answer and,
with repeats, every sample's): the judge prompt rendered from ``doc``, ``response`` and ``target``
(and ``choices``), with the judge's gen_kwargs. The request holds nothing else, so the per-request
cache keys a judge call by the judge model's identity, the rendered prompt and the gen_kwargs only:
an unchanged answer is never judged twice, a changed one is, and a rubric edit re-asks the judge
without touching the scored model.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from evalflow.core.records import DocSet, Filtered, JudgeItem, JudgeRequests, Request
from evalflow.judges.judge_spec import render_judge_prompt
from evalflow.judges.verdicts import first_text
from evalflow.taskspec.format.spec import TaskConfig
from evalflow.taskspec.prompts.templates import doc_to_choice, doc_to_target


def judge_requests(task: TaskConfig, docs: DocSet, filtered: Filtered) -> JudgeRequests:
    # task.metric_list is the node's projection: each judge's {metric, prompt, gen_kwargs}
    items: dict[tuple[str, int, str], JudgeItem] = {}
    for judge in task.metric_list or ():
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


def gold(task: TaskConfig, doc: Mapping[str, Any]) -> tuple[Any, Any]:
    """(target, choices) as a judge reads them: a choice task's target is the choice's text."""
    target = doc_to_target(task, doc)
    choices = doc_to_choice(task, doc) if task.doc_to_choice is not None else None
    if choices is not None and isinstance(target, int) and 0 <= target < len(choices):
        target = choices[target]
    return target, choices
