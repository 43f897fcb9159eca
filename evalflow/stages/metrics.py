"""Stage 6: per document and filter pipeline, the metric values (acc, exact_match, ...).

Metrics that run model-written code (pass_at_k) run it through the sandbox backend the run names
(``code_sandbox``); it is set here for the duration of the stage, since metrics see no settings.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from evalflow.records import DocSet, Filtered, Scores
from evalflow.sandbox.current import using
from evalflow.scoring.process import score_document
from evalflow.taskspec.prompt import is_multiple_input
from evalflow.taskspec.spec import TaskConfig
from evalflow.taskspec.templates import doc_to_choice, doc_to_target, doc_to_text


def metrics(task: TaskConfig, docs: DocSet, filtered: Filtered, code_sandbox: str) -> Scores:
    with using(code_sandbox):
        return _scores(task, docs, filtered)


def _scores(task: TaskConfig, docs: DocSet, filtered: Filtered) -> Scores:
    doc_ids = tuple(sorted({doc_id for doc_id, _ in filtered.keys}))
    targets = tuple(doc_to_target(task, docs.docs[d]) for d in doc_ids)
    choices = tuple(doc_to_choice(task, docs.docs[d]) if task.doc_to_choice is not None else None for d in doc_ids)
    # lm-eval's gold for multiple-input tasks (winogrande) is doc_to_text: the index of the right context.
    golds = tuple(doc_to_text(task, docs.docs[d]) for d in doc_ids) if is_multiple_input(task, docs) else targets
    # lm-eval decides "multiple targets" once per task, from the split's first document.
    multiple_target = isinstance(doc_to_target(task, docs.docs[0]), (list, tuple))
    by_filter: dict[str, tuple[dict[str, Any], ...]] = {}
    for name, values in filtered.by_filter.items():
        per_doc: dict[int, list[Any]] = defaultdict(list)
        for (doc_id, _), value in zip(filtered.keys, values):  # keys are sorted by (doc_id, idx)
            per_doc[doc_id].append(value)
        by_filter[name] = tuple(
            score_document(task, docs.docs[d], per_doc[d], target=gold, choices=choice, multiple_target=multiple_target)
            for d, gold, choice in zip(doc_ids, golds, choices)
        )
    return Scores(doc_ids=doc_ids, by_filter=by_filter, targets=targets)
