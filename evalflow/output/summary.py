"""A task's few sizes and names that results.json, the manifest and the run's counts need.

The results layout wants how many documents a task has, how many it evaluated, the split its
few-shot examples came from and its data fingerprint; the run counts a cached inference stage's
requests. Those are read off the ``load_docs``, ``fewshot`` and ``inference`` outputs, which on a
fully cached 5-shot mmlu run are ~60 MB of documents, prompts and answers to decode only for
their lengths. So the summary is memoized in the cache beside them (:func:`summary_key`: this
module's code and those stages' keys), as the samples text is, and a cached run decodes none of
them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from evalflow.cache.store import MISSING, CacheStore

SUMMARY_STAGES = ("load_docs", "fewshot", "inference")
"""The stages a summary is read from; its cache key is theirs and this module's code."""


@dataclass(frozen=True)
class TaskSummary:
    """What the writers need of a task's ``load_docs``, ``fewshot`` and ``inference`` outputs."""

    docs: int  # documents in the evaluated split
    evaluated: int  # documents evaluated (the fewshot stage's contexts: limit/samples applied)
    fewshot_split: str | None  # the split few-shot examples were really drawn from
    data: str  # the data's fingerprint (DocSet.fingerprint)
    requests: int  # the inference stage's responses


def summary_key(stage_keys: Mapping[str, str | None]) -> str | None:
    """The cache key of a task's summary given its stages' keys; None when one of them has none
    (a volatile model: its inference stage is recomputed, so its summary is too)."""
    from evalflow.cache.fingerprint import fingerprint
    from evalflow.dag.node import stage_code

    upstream = {name: stage_keys.get(name) for name in SUMMARY_STAGES}
    if any(key is None for key in upstream.values()):
        return None
    return "summary:" + fingerprint({"stage": "summary", "code": stage_code(f"{__name__}:task_summary"),
                                     "upstream": upstream})


def task_summary(outputs: Mapping[str, Any]) -> TaskSummary:
    """The summary of one task's stage outputs (decodes the three stages it reads)."""
    docs = outputs["load_docs"]
    return TaskSummary(len(docs.docs), len(outputs["fewshot"]), docs.fewshot_split, docs.fingerprint,
                       len(outputs["inference"].values))


def cached_summary(outputs: Mapping[str, Any], stage_keys: Mapping[str, str | None], store: CacheStore) -> TaskSummary:
    """The task's summary from the cache, else from its outputs (and then stored)."""
    key = summary_key(stage_keys)
    if key is not None:
        found = store.get(key)
        if isinstance(found, dict):
            try:
                return TaskSummary(**found)
            except TypeError:  # written by other code under the same key: cannot happen, recomputed
                pass
    summary = task_summary(outputs)
    if key is not None and found is MISSING:
        store.put(key, summary.__dict__, tag="summary")
    return summary
