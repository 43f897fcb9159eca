"""Stage 2: each evaluated document's prompt: description, few-shot examples, its own text.

``chat`` (None for plain prompts) carries the model's chat template text and lm-eval's chat
options; ``system_instruction`` is prepended to the description in both modes, as lm-eval does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evalflow.core.records import Context, DocSet
from evalflow.errors import ConfigError
from evalflow.taskspec.format.spec import TaskConfig
from evalflow.taskspec.prompts.fewshot_context import Render, build_contexts, render_plain


def evaluated_doc_ids(n_docs: int, limit: float | None, samples: Sequence[int] | None = None) -> list[int]:
    """lm-eval's ``limit``: the first N documents, or a fraction (< 1.0) of them, rounded up; or
    its ``samples``: these documents (sorted, as lm-eval evaluates them in dataset order)."""
    if samples is not None:
        outside = [i for i in samples if not 0 <= i < n_docs]
        if outside:
            raise ConfigError(
                f"samples: document index {outside[0]} is out of range; the evaluated split has {n_docs} "
                f"documents (indices 0 to {n_docs - 1})"
            )
        return sorted(set(samples))
    if limit is None:
        return list(range(n_docs))
    if limit <= 0:
        raise ConfigError(f"limit={limit} is out of range; use a positive count, or a fraction in (0, 1)")
    if limit < 1.0:
        count = int(-(-n_docs * limit // 1))  # ceil, as lm-eval
    else:
        if limit != int(limit):
            raise ConfigError(f"limit={limit}: a limit of 1 or more must be a whole number of documents")
        count = int(limit)
    return list(range(min(count, n_docs)))


def fewshot(
    task: TaskConfig,
    docs: DocSet,
    num_fewshot: int,
    fewshot_seed: int,
    limit: float | None,
    samples: Sequence[int] | None,
    system_instruction: str | None,
    chat: Mapping[str, Any] | None,
    subset: Sequence[int] | None = None,
) -> tuple[Context, ...]:
    """The contexts of the documents ``limit``/``samples`` select; with ``subset``, only those of
    its documents, each built in the WHOLE selection's few-shot stream (the sampler is consumed for
    every selected document in order, then the others are dropped): a partial run's document gets
    the prompt the whole run gives it, so the two pair, and a whole run later reuses its answers."""
    if not docs.docs:
        raise ConfigError(f"task '{task.task}': split '{docs.eval_split}' has no documents to evaluate")
    render: Render = render_plain
    if chat is not None:
        from evalflow.taskspec.prompts.chat_format import ChatFormat, chat_render

        fmt = ChatFormat(
            chat.get("template"),
            bool(chat.get("fewshot_as_multiturn")),
            chat.get("special_tokens") or {},
            messages=bool(chat.get("messages")),
            template_args=chat.get("template_args") or {},
        )
        render = chat_render(fmt, add_generation_prompt=not task.gen_prefix)
    evaluated = evaluated_doc_ids(len(docs.docs), limit, samples)
    contexts = build_contexts(
        task, docs, num_fewshot, fewshot_seed, evaluated, render=render, system_instruction=system_instruction
    )
    if subset is None:
        return contexts
    outside = sorted(set(subset) - set(evaluated))
    if outside:
        raise ConfigError(
            f"subset: task '{task.task}': document {outside[0]} is not among the {len(evaluated)} documents "
            "this run selects (limit/samples); a subset names documents of the run's own selection"
        )
    wanted = set(subset)
    return tuple(c for c in contexts if c.doc_id in wanted)
