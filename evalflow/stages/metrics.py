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
    by_filter: dict[str, tuple[dict[str, Any], ...]] = {}
    for name, values in filtered.by_filter.items():
        per_doc: dict[int, list[Any]] = defaultdict(list)
        for (doc_id, _), value in zip(filtered.keys, values):  # keys are sorted by (doc_id, idx)
            per_doc[doc_id].append(value)
        by_filter[name] = tuple(_score(task, docs.docs[d], d, per_doc[d]) for d in doc_ids)
    return Scores(doc_ids=doc_ids, by_filter=by_filter)


def _score(task: TaskConfig, doc: Any, doc_id: int, results: list[Any]) -> dict[str, Any]:
    choices = doc_to_choice(task, doc) if task.doc_to_choice is not None else None
    return score_document(task, doc, results, target=doc_to_target(task, doc), choices=choices)
