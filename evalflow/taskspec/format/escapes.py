"""Literal ``\\n`` and ``\\t`` in task YAMLs: lm-eval's most common silent task bug, found at load time.

YAML turns ``\\n`` into a newline only inside double quotes. ``until: ['\\n']`` (single quotes, or no
quotes) is a backslash and an ``n``: the stop sequence never matches, the model generates to
``max_gen_toks`` and exact_match scores 0; ``doc_to_text: 'Q: {{q}}\\nA:'`` puts the two characters
in the prompt. Neither is an error anywhere, so this module finds them:

>>> from evalflow.taskspec.format.spec import TaskConfig
>>> t = TaskConfig(task="t", doc_to_text="Q: {{q}}\\\\nA:", generation_kwargs={"until": ["\\\\n"]})
>>> [(f.key, f.value) for f in literal_escapes(t)]
[('generation_kwargs.until', '\\\\n'), ('doc_to_text', 'Q: {{q}}\\\\nA:')]

What is flagged, and why not more:

* Plain strings (``generation_kwargs.until``, ``target_delimiter``, ``fewshot_delimiter``, and their
  ``fewshot_config`` overrides): any ``\\n``/``\\t`` not after another backslash. They are compared or
  inserted as they are; a stop sequence or delimiter of a literal backslash-n is never meant.
* Templates (``doc_to_text``, ``doc_to_target``, ``doc_to_choice``, ``description``, ``gen_prefix``,
  and the ``fewshot_config`` ones): only in the literal text outside Jinja's ``{{ }}``, ``{% %}`` and
  ``{# #}`` (inside them Jinja's own string literals decode ``'\\n'``, so ``split('\\n')`` is right),
  and only when no lowercase letter follows: ``\\neq``, ``\\nu``, ``\\theta``, ``\\times``, ``\\text`` are
  LaTeX in math prompts, while the footgun is ``\\nA:``, ``\\n\\n`` or ``\\n`` at the end. A
  ``doc_to_choice``/``doc_to_target`` template of the form ``"[...]"`` is skipped: its rendered text
  is read as a Python list literal (super_glue/multirc), whose quotes decode ``\\n`` themselves.
* Regular expressions (``filter_list``'s ``regex_pattern``) are never checked: there ``\\n`` is the
  regex's own escape and means a newline.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from evalflow.taskspec.format.spec import TaskConfig

__all__ = ["LiteralEscape", "literal_escapes"]

_PLAIN = re.compile(r"(?<!\\)\\[nt]")
_IN_TEMPLATE = re.compile(r"(?<!\\)\\[nt](?![a-z])")
_JINJA_TAG = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)
_PLAIN_KEYS = ("target_delimiter", "fewshot_delimiter")
_TEMPLATE_KEYS = ("doc_to_text", "doc_to_target", "doc_to_choice", "description", "gen_prefix")
_LITERAL_KEYS = ("doc_to_target", "doc_to_choice")  # a rendered "[...]" is read with ast.literal_eval
_IN_PROMPT = "The prompts will contain the two characters."


@dataclass(frozen=True)
class LiteralEscape:
    """One value holding a literal backslash sequence where a control character was meant."""

    key: str  # dotted, e.g. "generation_kwargs.until" or "fewshot_config.doc_to_text"
    value: str
    at: int  # where the first flagged sequence starts in ``value``
    effect: str  # what goes wrong in the run, for the warning

    def message(self, task_names: str, file: str) -> str:
        """One paragraph: the file, the key, what happens, and the fix."""
        start, end = max(0, self.at - 30), self.at + 25
        shown = ("..." if start else "") + self.value[start:end] + ("..." if end < len(self.value) else "")
        shown = " ".join(shown.splitlines())  # as typed: not repr, which doubles the backslash
        return (
            f"{file}: `{self.key}` of {task_names} holds '{shown}', with a literal backslash and letter "
            f"(two characters) where a newline or tab was meant: YAML decodes \\n and \\t only inside "
            f"double quotes, not in single quotes or unquoted values. {self.effect} Fix: write the "
            'value in double quotes, e.g. "\\n".'
        )


def literal_escapes(task: TaskConfig) -> tuple[LiteralEscape, ...]:
    """Every suspicious literal ``\\n``/``\\t`` in ``task``'s strings, in a fixed key order."""
    return tuple(_findings(task))


def _findings(task: TaskConfig) -> Iterator[LiteralEscape]:
    until = (task.generation_kwargs or {}).get("until")
    for value in [until] if isinstance(until, str) else until if isinstance(until, (list, tuple)) else ():
        found = _PLAIN.search(value) if isinstance(value, str) else None
        if found:
            yield LiteralEscape(
                "generation_kwargs.until",
                str(value),
                found.start(),
                (
                    "As a stop sequence it never matches, so every answer runs to max_gen_toks (and is "
                    "then scored with the extra text)."
                ),
            )
    few = task.fewshot_config if isinstance(task.fewshot_config, Mapping) else {}
    sections: tuple[tuple[str, Mapping[str, Any]], ...] = (("", _fields(task)), ("fewshot_config.", few))
    for prefix, values in sections:
        for key in _PLAIN_KEYS:
            value = values.get(key)
            found = _PLAIN.search(value) if isinstance(value, str) else None
            if found:
                yield LiteralEscape(prefix + key, str(value), found.start(), _IN_PROMPT)
        for key in _TEMPLATE_KEYS:
            for value in _strings(values.get(key)):
                if key in _LITERAL_KEYS and value.strip()[:1] == "[" and value.strip()[-1:] == "]":
                    continue  # rendered, then read as a Python list literal, which decodes \n itself
                at = _outside_tags(value)
                if at is not None:
                    yield LiteralEscape(prefix + key, value, at, _IN_PROMPT)


def _outside_tags(template: str) -> int | None:
    """Where the first flagged sequence in the template's literal text (outside Jinja tags) is."""
    tags = [m.span() for m in _JINJA_TAG.finditer(template)]
    for found in _IN_TEMPLATE.finditer(template):
        if not any(a <= found.start() < b for a, b in tags):
            return found.start()
    return None


def _fields(task: TaskConfig) -> dict[str, Any]:
    return {key: getattr(task, key) for key in _PLAIN_KEYS + _TEMPLATE_KEYS}


def _strings(value: Any) -> list[str]:
    """A template field's strings: itself, or a literal list's items (``doc_to_choice: [...]``)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []
