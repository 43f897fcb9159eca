"""Each document's cluster id, from the task's ``cluster_key`` (an evalflow extension of the format).

Documents that share a passage, a subject or a source are not independent draws: a model that
misreads the passage misses several of its questions together, and an error bar that counts them
as independent is too narrow (Miller 2024, "Adding error bars to evals"). A task names what its
documents share with ``cluster_key``: a document field (``passage``) or, like lm-eval's
``doc_to_*`` keys, a Jinja template rendered with the document's fields (``{{article_id}}``).

An id longer than :data:`MAX_ID_CHARS` (a whole passage) is recorded as ``sha256:`` and the first
16 hex digits of its hash: the same passage gives the same id, and the samples file does not hold
every passage twice.

    >>> from evalflow.taskspec.format.spec import TaskConfig
    >>> cluster_ids(TaskConfig(task="t", cluster_key="p"), [{"p": "a"}, {"p": "b"}, {"p": "a"}])
    ('a', 'b', 'a')
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from evalflow.errors import TaskError
from evalflow.taskspec.format.spec import TaskConfig
from evalflow.taskspec.prompts.templates import apply_template

MAX_ID_CHARS = 64


def cluster_ids(task: TaskConfig, docs: Sequence[Mapping[str, Any]]) -> tuple[str, ...] | None:
    """Per document (in order), its cluster id; None for a task without ``cluster_key``."""
    key = task.cluster_key
    if key is None:
        return None
    return tuple(_short(cluster_id(key, doc, task, doc_id)) for doc_id, doc in enumerate(docs))


def cluster_id(key: str, doc: Mapping[str, Any], task: TaskConfig, doc_id: int) -> str:
    """One document's id: the field's value (as text) when ``key`` names a field, else the
    template rendered; a missing field or an empty id is a :class:`TaskError` naming the task
    file, the key and the document."""
    if key in doc:
        value = doc[key]
        text = "" if value is None else str(value)
    elif "{{" in key or "{%" in key:
        text = apply_template(key, doc, task=task, what="cluster_key", doc_id=doc_id)
    else:  # neither a field nor a template: every document would share one literal id
        raise TaskError(
            f"{task.where('cluster_key')}: `cluster_key: {key}` names no field of document {doc_id} "
            f"(its fields: {sorted(doc)}) and is no Jinja template. Name a field of the documents, or "
            'write a template such as `cluster_key: "{{source_id}}"`; add the field with process_docs '
            "if the documents lack it."
        )
    if not text.strip():
        raise TaskError(
            f"{task.where('cluster_key')}: `cluster_key: {key}` gives document {doc_id} an empty cluster "
            f"id (its fields: {sorted(doc)}). Name a field every document has a value in, or write a "
            "template that renders a non-empty id for every document, or remove cluster_key."
        )
    return text


def _short(text: str) -> str:
    if len(text) <= MAX_ID_CHARS:
        return text
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
