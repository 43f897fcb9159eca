"""Stage 3: the model requests each document needs (one per choice, or one generation per repeat)."""

from __future__ import annotations

from typing import Any, Mapping

from evalflow.records import Context, DocSet, Instance
from evalflow.taskspec.requests import build_instances
from evalflow.taskspec.spec import TaskConfig


def instances(
    task: TaskConfig,
    docs: DocSet,
    contexts: tuple[Context, ...],
    gen_kwargs: Mapping[str, Any] | None,
    seed: int,
) -> tuple[Instance, ...]:
    out: list[Instance] = []
    for ctx in contexts:
        out.extend(build_instances(task, ctx.doc_id, docs.docs[ctx.doc_id], ctx, gen_kwargs=gen_kwargs, seed=seed))
    return tuple(out)
