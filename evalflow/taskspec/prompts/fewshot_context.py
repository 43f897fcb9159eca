"""The full prompt of each document, byte-identical to lm-eval 0.4.13's ``fewshot_context``.

A prompt is a list of turns (lm-eval's ``Message``): the description as a system turn, one
question turn and one answer turn per few-shot example, then the document's question (and its
``gen_prefix``). Plain text is the turns' contents joined with their delimiters. Chat formatting
(``apply_chat_template``, ``fewshot_as_multiturn``, ``system_instruction``) will be another
:data:`Render` over the same turns: that is the seam, ``build_contexts(..., render=...)``.

Few-shot examples come from ONE seeded sampler per task, consumed in document order for exactly
the evaluated documents, as in lm-eval; so a context depends on which documents precede it and
the whole tuple of contexts is built in one call.

>>> from evalflow.core.records import DocSet
>>> from evalflow.taskspec.format.spec import TaskConfig
>>> t = TaskConfig(task="t", test_split="test", doc_to_text="Q: {{q}}\\nA:", doc_to_target="{{a}}",
...                description="Arithmetic.\\n\\n")
>>> rows = tuple({"q": f"{i}+1", "a": str(i + 1)} for i in range(4))
>>> ctx = build_contexts(t, DocSet("test", rows, "test", rows), 1, 1234, [0, 1])
>>> ctx[0].prompt, ctx[0].fewshot_ids
('Arithmetic.\\n\\nQ: 3+1\\nA: 4\\n\\nQ: 0+1\\nA:', (3,))
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalflow.core.records import Context, DocSet
from evalflow.errors import ConfigError, DataError, TaskError
from evalflow.taskspec.format.spec import TaskConfig
from evalflow.taskspec.prompts.samplers import (
    ContextSampler,
    FewshotOptions,
    excludes_eval_doc,
    fewshot_options,
    make_sampler,
)
from evalflow.taskspec.prompts.templates import doc_to_choice, doc_to_target, doc_to_text, resolve_field


@dataclass(frozen=True)
class Turn:
    """One message of a prompt; ``delimiter`` is appended when it is rendered as plain text."""

    role: str  # "system" | "user" | "assistant"
    content: str
    delimiter: str = ""


Render = Callable[[Sequence[Turn]], str]


def render_plain(turns: Sequence[Turn]) -> str:
    """lm-eval's non-chat rendering: every turn's content followed by its delimiter."""
    return "".join(t.content + t.delimiter for t in turns)


def maybe_delimit(prefix: str | None, suffix: str | None, delimiter: str = " ") -> str:
    """Join two strings, adding ``delimiter`` only if neither has whitespace at the seam."""
    if not prefix:
        return suffix or ""
    if not suffix:
        return prefix
    if prefix[-1].isspace() or suffix[0].isspace():
        return prefix + suffix
    return prefix + delimiter + suffix


def requires_delimiter(prefix: str, suffix: str) -> bool:
    """True if neither string has whitespace where they meet (lm-eval's rule for ``gen_prefix``)."""
    return prefix != "" and not (prefix[-1].isspace() or suffix[0].isspace())


def qa_turn(
    question: Any,
    choices: Sequence[Any] | None,
    answer: Any,
    gen_prefix: str | None,
    target_delimiter: str,
    fewshot_delimiter: str,
) -> list[Turn]:
    """One question and, for an example, its answer (lm-eval's ``build_qa_turn``).

    An int answer indexes ``choices``; a list answer means its first target. A question with
    neither answer nor ``gen_prefix`` gets no delimiter: the model continues right after it.
    """
    if not isinstance(question, str):
        raise TaskError(
            f"doc_to_text gave {question!r} ({type(question).__name__}) where a prompt text is needed; "
            "only multiple-input tasks (doc_to_text returning a choice index) may return an int."
        )
    has_answer = answer is not None and answer != ""
    needs_delim = (has_answer and not gen_prefix) or bool(gen_prefix and requires_delimiter(question, gen_prefix))
    turns = [Turn("user", question, target_delimiter if needs_delim else "")]
    if has_answer:
        if choices and isinstance(answer, int):
            if not -len(choices) <= answer < len(choices):
                raise DataError(
                    f"a few-shot example's answer index {answer} is outside its {len(choices)} "
                    f"choices {list(choices)[:6]!r}; check the example's label field."
                )
            text = choices[answer]
        else:
            text = answer[0] if isinstance(answer, list) else answer
        if not isinstance(text, str):
            raise TaskError(
                f"a few-shot answer is {text!r} ({type(text).__name__}), not a string: an int target "
                "needs doc_to_choice to index into. Add doc_to_choice or make doc_to_target a string."
            )
        turns.append(Turn("assistant", maybe_delimit(gen_prefix, text, " "), fewshot_delimiter))
    elif gen_prefix:
        turns.append(Turn("assistant", gen_prefix))
    return turns


def effective_num_fewshot(task: TaskConfig, requested: int | None) -> int:
    """lm-eval's rule: a run's num_fewshot overrides the task's, except a task pinned to 0 shots."""
    if requested is None:
        return task.num_fewshot or 0
    return 0 if task.num_fewshot == 0 else requested


def is_multiple_input(task: TaskConfig, docs: DocSet) -> bool:
    """Whether each choice is its own context (winogrande): lm-eval decides on the split's first doc."""
    if task.doc_to_choice is None or not docs.docs:
        return False
    first = doc_to_text(task, docs.docs[0], doc_id=0)
    return isinstance(first, int) and not isinstance(first, bool)


def example_turns(
    task: TaskConfig, opts: FewshotOptions, example: Mapping[str, Any], multiple_input: bool
) -> list[Turn]:
    """The question and answer turns of one few-shot example, formatted by ``fewshot_config``."""
    question = doc_to_text(task, example, override=opts.doc_to_text)
    choices = doc_to_choice(task, example, override=opts.doc_to_choice) if opts.doc_to_choice else None
    answer = doc_to_target(task, example, override=opts.doc_to_target)
    gen_prefix = resolve_field(example, opts.gen_prefix, task=task, what="fewshot gen_prefix")
    if multiple_input:
        question, choices = _pick(choices, question), None
    return qa_turn(question, choices, answer, gen_prefix, opts.target_delimiter, opts.fewshot_delimiter)


def doc_turns(
    task: TaskConfig, doc: Mapping[str, Any], doc_id: int, prefix: list[Turn], multiple_input: bool
) -> list[list[Turn]]:
    """The turns of each context of ``doc``: one list, or one per choice for multiple input."""
    gen_prefix = resolve_field(doc, task.gen_prefix, task=task, what="gen_prefix", doc_id=doc_id)
    if multiple_input:
        contexts = doc_to_choice(task, doc, doc_id=doc_id)
        return [prefix + qa_turn(c, None, None, gen_prefix, "", "") for c in contexts]
    question = doc_to_text(task, doc, doc_id=doc_id)
    return [prefix + qa_turn(question, None, None, gen_prefix, task.target_delimiter, "")]


def build_contexts(
    task: TaskConfig,
    docs: DocSet,
    num_fewshot: int,
    fewshot_seed: int | None,
    doc_ids: Sequence[int],
    *,
    render: Render = render_plain,
    system_instruction: str | None = None,
) -> tuple[Context, ...]:
    """The context of every evaluated document, drawing few-shot examples from one stream.

    ``doc_ids`` must be ascending (lm-eval's ``limit`` is the first N documents): the sampler is
    consumed once per listed document, in that order, exactly as lm-eval consumes it.
    ``Context.fewshot_ids`` are positions in ``docs.fewshot_docs``. ``fewshot_seed`` may be None
    only when no random draw is needed (0 shots, or the first_n sampler).
    """
    _check_doc_ids(task, docs, doc_ids, num_fewshot)
    opts = fewshot_options(task)
    multiple_input = is_multiple_input(task, docs)
    sampler = _sampler(task, docs, opts, num_fewshot, fewshot_seed)
    exclude = excludes_eval_doc(task)
    # an example's turns, rendered once: 5-shot mmlu draws its 5 dev documents for each of 14,042 prompts
    examples: dict[int, list[Turn]] = {}
    out = []
    for doc_id in doc_ids:
        doc = docs.docs[doc_id]
        prefix: list[Turn] = []
        description = resolve_field(doc, task.description, task=task, what="description", doc_id=doc_id)
        system = maybe_delimit(system_instruction, description, task.fewshot_delimiter)
        if system:
            prefix.append(Turn("system", system))
        ids: tuple[int, ...] = ()
        if sampler is not None:
            ids = sampler.sample(num_fewshot, eval_doc=doc if exclude else None)
            for i in ids:
                if i not in examples:
                    examples[i] = example_turns(task, opts, sampler.pool[i], multiple_input)
                prefix += examples[i]
        prompts = [render(turns) for turns in doc_turns(task, doc, doc_id, prefix, multiple_input)]
        out.append(Context(doc_id, tuple(prompts) if multiple_input else prompts[0], ids))
    return tuple(out)


def _sampler(
    task: TaskConfig, docs: DocSet, opts: FewshotOptions, num_fewshot: int, seed: int | None
) -> ContextSampler | None:
    if num_fewshot == 0:
        return None
    if not docs.fewshot_docs:
        raise TaskError(
            f"task '{task.task}' ({task.source}): num_fewshot is {num_fewshot} but the task has no "
            "few-shot documents. Set fewshot_split (or training/validation_split), or "
            "fewshot_config.samples, or run with num_fewshot=0."
        )
    return make_sampler(opts.sampler, docs.fewshot_docs, seed=seed, indices=opts.fewshot_indices)


def _check_doc_ids(task: TaskConfig, docs: DocSet, doc_ids: Sequence[int], num_fewshot: int) -> None:
    if num_fewshot < 0:
        raise ConfigError(f"num_fewshot must be 0 or more, got {num_fewshot} for task '{task.task}'")
    if any(b <= a for a, b in itertools.pairwise(doc_ids)):
        raise ConfigError(
            f"task '{task.task}': the documents to evaluate must be listed in ascending order without "
            "repeats, since few-shot draws follow document order; sort the selected ids."
        )
    if doc_ids and not (doc_ids[0] >= 0 and doc_ids[-1] < len(docs.docs)):
        raise ConfigError(
            f"task '{task.task}': document ids must lie in 0..{len(docs.docs) - 1} (split "
            f"'{docs.eval_split}' has {len(docs.docs)} documents); got {doc_ids[0]}..{doc_ids[-1]}."
        )


def _pick(choices: Sequence[Any] | None, index: Any) -> Any:
    if choices is None or not isinstance(index, int) or not -len(choices) <= index < len(choices):
        raise DataError(
            f"a multiple-input few-shot example's doc_to_text gave {index!r}, which is not an index "
            f"into its {len(choices or [])} choices; check the example's answer field."
        )
    return choices[index]
