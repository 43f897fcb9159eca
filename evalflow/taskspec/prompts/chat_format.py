"""Chat-formatted prompts: lm-eval's ``apply_chat_template``, ``fewshot_as_multiturn`` and
``system_instruction``, rendered from the turns :mod:`evalflow.taskspec.prompts.fewshot_context` builds.

The chat template is the model tokenizer's template *text*, read at plan time without loading the
model (:func:`evalflow.taskspec.prompts.chat_templates.chat_template_text`); it is part of the few-shot stage's key,
so a changed template re-renders prompts and nothing else changes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalflow.taskspec.prompts.fewshot_context import Render, Turn


@dataclass(frozen=True)
class ChatFormat:
    template: str | None  # None with ``messages``
    fewshot_as_multiturn: bool = False
    special_tokens: Mapping[str, Any] = field(default_factory=dict)  # bos_token, eos_token, ...
    messages: bool = False  # a chat API: the prompt is the messages as JSON (lm-eval's JsonChatStr)
    # the template's keyword arguments (lm-eval's chat_template_args, enable_thinking merged in)
    template_args: Mapping[str, Any] = field(default_factory=dict)


def chat_messages(turns: Sequence[Turn], multiturn: bool) -> list[dict[str, str]]:
    """lm-eval's messages: every turn, or (``multiturn`` off) the system turn, one user turn with
    all the rest as plain text, and a trailing assistant turn (a gen_prefix) kept apart."""
    if multiturn:
        return [{"role": t.role, "content": t.content} for t in turns]
    system, rest = (turns[0], list(turns[1:])) if turns and turns[0].role == "system" else (None, list(turns))
    tail: list[dict[str, str]] = []
    if rest and rest[-1].role == "assistant":
        tail = [{"role": "assistant", "content": rest[-1].content}]
        rest = rest[:-1]
    text = "".join(t.content + t.delimiter for t in rest[:-1]) + (rest[-1].content if rest else "")
    head = [{"role": "system", "content": system.content}] if system else []
    return head + [{"role": "user", "content": text}] + tail


def chat_render(fmt: ChatFormat, *, add_generation_prompt: bool) -> Render:
    """A renderer for ``build_contexts``: turns -> the chat template's text (or, for a chat API,
    the messages as JSON).

    Without a generation prompt (a task with ``gen_prefix``) the final assistant message is
    continued, as lm-eval asks transformers to (``continue_final_message``).
    """
    if fmt.messages:  # the server applies its template; lm-eval sends json.dumps(messages)
        return lambda turns: json.dumps(chat_messages(turns, fmt.fewshot_as_multiturn), ensure_ascii=False)

    from evalflow.taskspec.prompts.chat_templates import render_chat

    template = fmt.template
    if template is None:
        raise ValueError("a ChatFormat without messages needs the chat template it renders with")

    def render(turns: Sequence[Turn]) -> str:
        messages = chat_messages(turns, fmt.fewshot_as_multiturn)
        return render_chat(
            template,
            messages,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=not add_generation_prompt,
            **{**fmt.special_tokens, **fmt.template_args},
        )

    return render
