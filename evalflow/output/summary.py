"""A task's few sizes and names that results.json, the manifest and the run's counts need.

The results layout wants how many documents a task has, how many it evaluated, the split its
few-shot examples came from and its data fingerprint; the run counts a cached inference stage's
requests. Those are read off the ``load_docs``, ``fewshot`` and ``inference`` outputs, which on a
fully cached 5-shot mmlu run are ~60 MB of documents, prompts and answers to decode only for
their lengths. So the summary is an output node of the pipeline (``summary`` in
:data:`evalflow.dag.pipeline.OUTPUTS`: keyed by this module's code and those stages' keys, cached
beside them), as the samples text is, and a cached run decodes none of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalflow.core.records import DocSet, Responses


@dataclass(frozen=True)
class TaskSummary:
    """What the writers need of a task's ``load_docs``, ``fewshot`` and ``inference`` outputs."""

    docs: int  # documents in the evaluated split
    evaluated: int  # documents evaluated (the fewshot stage's contexts: limit/samples applied)
    fewshot_split: str | None  # the split few-shot examples were really drawn from
    data: str  # the data's fingerprint (DocSet.fingerprint)
    requests: int  # the inference stage's responses

    @classmethod
    def of(cls, outputs: Mapping[str, Any]) -> TaskSummary:
        """The summary among a task's outputs (the node's value, read from the cache or computed)."""
        return cls(**outputs["summary"])


def task_summary(docs: DocSet, contexts: Sequence[Any], responses: Responses) -> dict[str, Any]:
    """The summary node: the summary of the three stages it reads, as plain data (what the cache
    stores; :meth:`TaskSummary.of` reads it back)."""
    summary = TaskSummary(len(docs.docs), len(contexts), docs.fewshot_split, docs.fingerprint, len(responses.values))
    return dataclasses.asdict(summary)
