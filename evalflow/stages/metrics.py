"""Stage 6: per document and filter pipeline, the metric values (acc, exact_match, ...)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from evalflow.records import DocSet, Filtered, Scores
from evalflow.scoring.process import score_document
from evalflow.taskspec.spec import TaskConfig
from evalflow.taskspec.templates import doc_to_choice, doc_to_target


def metrics(task: TaskConfig, docs: DocSet, filtered: Filtered) -> Scores:
    doc_ids = tuple(sorted({doc_id for doc_id, _ in filtered.keys}))
    targets = tuple(doc_to_target(task, docs.docs[d]) for d in doc_ids)
    choices = tuple(doc_to_choice(task, docs.docs[d]) if task.doc_to_choice is not None else None for d in doc_ids)
    by_filter: dict[str, tuple[dict[str, Any], ...]] = {}
    for name, values in filtered.by_filter.items():
        per_doc: dict[int, list[Any]] = defaultdict(list)
        for (doc_id, _), value in zip(filtered.keys, values):  # keys are sorted by (doc_id, idx)
            per_doc[doc_id].append(value)
        by_filter[name] = tuple(
            score_document(task, docs.docs[d], per_doc[d], target=target, choices=choice)
            for d, target, choice in zip(doc_ids, targets, choices)
        )
    return Scores(doc_ids=doc_ids, by_filter=by_filter, targets=targets)
