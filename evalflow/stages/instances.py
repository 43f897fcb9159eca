"""Stage 3: the model requests each document needs (one per choice, or one generation per repeat).

With a chat template, lm-eval drops the target delimiter before multiple-choice continuations
(the assistant turn starts the answer) unless a ``gen_prefix`` without trailing space needs it.
A multimodal task's requests end with ``{"visual": [ImageRef, ...]}``, lm-eval's layout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import evalflow.cache.image_store  # noqa: F401 - its pixel hash makes the stage's image references: in its code key
from evalflow.core.records import Context, DocSet, Instance
from evalflow.taskspec.data.images import doc_images, is_multimodal
from evalflow.taskspec.format.spec import TaskConfig
from evalflow.taskspec.prompts.requests import build_instances


def instances(
    task: TaskConfig,
    docs: DocSet,
    contexts: tuple[Context, ...],
    gen_kwargs: Mapping[str, Any] | None,
    seed: int,
    apply_chat_template: bool,
    images: Any = None,
) -> tuple[Instance, ...]:
    if apply_chat_template and task.output_type == "multiple_choice":
        prefix = task.gen_prefix or ""
        keep = prefix != "" and not prefix[-1].isspace()
        task = dataclasses.replace(task, target_delimiter=task.target_delimiter if keep else "")
    out: list[Instance] = []
    multimodal = is_multimodal(task)
    for ctx in contexts:
        doc = docs.docs[ctx.doc_id]
        visual = doc_images(task, doc, ctx.doc_id, images) if multimodal else None
        out.extend(build_instances(task, ctx.doc_id, doc, ctx, gen_kwargs=gen_kwargs, seed=seed, visual=visual))
    return tuple(out)
