"""lm-eval's ``doc_to_*`` semantics: field names, Jinja templates, literals and task functions.

A task's ``doc_to_text`` / ``doc_to_target`` / ``doc_to_choice`` can be a document field name, a
Jinja template, an int (a fixed choice index), a list (fixed choices) or a ``!function`` reference;
each output type then leans on quirks of lm-eval 0.4.13 (``lm_eval/api/task.py``) that change the
prompt bytes, so they are reproduced exactly here:

- a string that is a field of the document is that field's value, otherwise it is a template;
- a rendered text or target made of digits becomes an int when the task has ``doc_to_choice``
  (an index into the choices), and a rendered target that looks like ``[...]`` is a Python literal;
- a rendered ``doc_to_choice`` is always a Python literal (``"{{choices.text}}"`` renders a list's
  repr), a dict of choices means its values;
- templates render with ``StrictUndefined`` and ``keep_trailing_newline`` and know lm-eval's
  ``regex_replace`` filter; unlike lm-eval the environment is sandboxed (same text, no code).

>>> from evalflow.taskspec.format.spec import TaskConfig
>>> t = TaskConfig(task="t", doc_to_text="Q: {{q}}\\nA:", doc_to_target="{{ans}}", doc_to_choice=["a", "b"])
>>> doc_to_text(t, {"q": "1+1?", "ans": "1"}), doc_to_target(t, {"q": "1+1?", "ans": "1"})
('Q: 1+1?\\nA:', 1)
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

import jinja2
from jinja2 import BaseLoader, StrictUndefined
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from evalflow.errors import DataError, EvalflowError, TaskError
from evalflow.taskspec.format.spec import FunctionRef, TaskConfig


def regex_replace(string: str, pattern: str, repl: str, count: int = 0) -> str:
    """lm-eval's custom Jinja filter: ``re.sub`` inside templates."""
    return re.sub(pattern, repl, string, count=count)


# lm-eval's environment, sandboxed: a template (from any task folder, trusted or not) renders the
# same text but cannot reach Python internals (``cycler.__init__.__globals__.os``) to run code.
ENV = SandboxedEnvironment(loader=BaseLoader(), undefined=StrictUndefined, keep_trailing_newline=True)
ENV.filters["regex_replace"] = regex_replace


@functools.lru_cache(maxsize=4096)
def _compile(template: str) -> jinja2.Template:
    """Compile once per distinct template: a task renders the same few templates thousands of times."""
    return ENV.from_string(template)


def apply_template(
    template: str,
    doc: Mapping[str, Any],
    *,
    task: TaskConfig | None = None,
    what: str = "template",
    doc_id: int | None = None,
) -> str:
    """Render ``template`` with the document's fields as variables (lm-eval's ``apply_template``).

    A missing field is a :class:`TaskError` naming the task, the document and the field, because
    it is nearly always a typo in the YAML; an exception raised while rendering (say ``.index()``
    of a label the row lacks) is a :class:`DataError`, since the template is fine for other rows.
    """
    where = _where(task, what, doc_id)
    try:
        compiled = _compile(template)
    except jinja2.TemplateSyntaxError as exc:
        raise TaskError(
            f"{where}: the Jinja template {template!r} does not parse ({exc.message}, line "
            f"{exc.lineno}). Fix the template in the task YAML."
        ) from None
    try:
        return compiled.render(**doc)
    except SecurityError as exc:
        raise TaskError(
            f"{where}: the template {template!r} tries an unsafe operation ({exc}); templates may "
            "read document fields and call ordinary string/list methods only. Move such logic into "
            "a !function in the task's Python file."
        ) from None
    except jinja2.UndefinedError as exc:
        raise TaskError(
            f"{where}: the template {template!r} uses {exc.message}; the document's fields are "
            f"{sorted(doc)}. Fix the field name in the template, or add the field with process_docs."
        ) from None
    except Exception as exc:
        raise DataError(
            f"{where}: rendering the template {template!r} failed with "
            f"{type(exc).__name__}: {exc}. Check that this document has the shape the template expects."
        ) from None


def call_function(value: Any) -> Callable[..., Any]:
    """A ``!function`` reference (or a plain callable from a Python-defined task) as a callable."""
    if isinstance(value, FunctionRef):
        from evalflow.taskspec.format.loader import resolve_function  # lazy: only tasks with code need it

        return resolve_function(value)
    return value


def call_task_function(
    spec: Any,
    *args: Any,
    task: TaskConfig,
    what: str,
    doc_id: int | None = None,
    doc: Mapping[str, Any] | None = None,
) -> Any:
    """Call a task's ``!function`` on ``args``; an exception it raises becomes a :class:`TaskError`
    naming the task, the field (``what``) and the document, instead of a bare traceback."""
    fn = call_function(spec)
    try:
        return fn(*args)
    except EvalflowError:
        raise
    except Exception as exc:
        name = (
            f"{spec.attr} ({spec.module_path})"
            if isinstance(spec, FunctionRef)
            else getattr(spec, "__name__", repr(spec))
        )
        shown = "" if doc is None else f" on {_excerpt(doc)}"
        raise TaskError(
            f"{_where(task, what, doc_id)}: the task function {name} raised {type(exc).__name__}: {exc}"
            f"{shown}. Fix the function or the data; EVALFLOW_DEBUG=1 shows the traceback."
        ) from exc


def _excerpt(doc: Mapping[str, Any], width: int = 200) -> str:
    text = repr(dict(doc))
    return "the document " + (text if len(text) <= width else text[: width - 3] + "...")


def resolve_field(doc: Mapping[str, Any], value: str | None, **where: Any) -> Any:
    """A field's value if ``value`` names a field, else ``value`` rendered as a template.

    lm-eval resolves ``description`` and ``gen_prefix`` this way; ``None`` or ``""`` give ``None``.
    """
    if not value:
        return None
    return doc[value] if value in doc else apply_template(value, doc, **where)


def doc_to_text(
    task: TaskConfig, doc: Mapping[str, Any], *, override: Any = None, doc_id: int | None = None
) -> str | int | list[Any]:
    """The input text of ``doc`` (an int for multiple-input tasks such as winogrande)."""
    spec = override if override is not None else task.doc_to_text
    _refuse_prompt(task)
    if isinstance(spec, bool) or spec is None:
        raise _bad_spec(task, "doc_to_text", spec)
    if isinstance(spec, int):
        return spec
    if isinstance(spec, str):
        if spec in doc:
            return doc[spec]
        text = apply_template(spec, doc, task=task, what="doc_to_text", doc_id=doc_id)
        if text.isdigit() and task.doc_to_choice is not None:
            return _literal(text, task, "doc_to_text", doc_id)
        return text
    if callable(spec) or isinstance(spec, FunctionRef):
        return call_task_function(spec, doc, task=task, what="doc_to_text", doc_id=doc_id, doc=doc)
    raise _bad_spec(task, "doc_to_text", spec)


def doc_to_target(
    task: TaskConfig, doc: Mapping[str, Any], *, override: Any = None, doc_id: int | None = None
) -> str | int | list[Any]:
    """The gold answer of ``doc``: a string, a choice index, or a list of acceptable targets."""
    spec = override if override is not None else task.doc_to_target
    _refuse_prompt(task)
    if isinstance(spec, bool) or spec is None:
        raise _bad_spec(task, "doc_to_target", spec)
    if isinstance(spec, int):
        return spec
    if isinstance(spec, str):
        if spec in doc:
            return doc[spec]
        target = apply_template(spec, doc, task=task, what="doc_to_target", doc_id=doc_id)
        if target.isdigit() and task.doc_to_choice is not None:
            return _literal(target, task, "doc_to_target", doc_id)
        if len(target) >= 2 and target[0] == "[" and target[-1] == "]":
            try:
                return ast.literal_eval(target)
            except _LITERAL_ERRORS:  # lm-eval keeps such a target as text (and crashes on TypeError)
                return target
        return target
    if isinstance(spec, (list, tuple)):
        return list(spec)
    if callable(spec) or isinstance(spec, FunctionRef):
        return call_task_function(spec, doc, task=task, what="doc_to_target", doc_id=doc_id, doc=doc)
    raise _bad_spec(task, "doc_to_target", spec)


def doc_to_choice(
    task: TaskConfig, doc: Mapping[str, Any], *, override: Any = None, doc_id: int | None = None
) -> list[Any]:
    """The answer choices of ``doc``, in order."""
    spec = override if override is not None else task.doc_to_choice
    _refuse_prompt(task)
    if spec is None:
        raise TaskError(
            f"{_where(task, 'doc_to_choice', doc_id)}: the task has no doc_to_choice, but its output "
            "type needs answer choices. Add doc_to_choice (a field, a template rendering a list, a "
            "list, or a !function) to the task YAML."
        )
    if isinstance(spec, str):
        if spec in doc:
            return _choice_list(doc[spec], task, f"the field '{spec}'", doc_id)
        rendered = apply_template(spec, doc, task=task, what="doc_to_choice", doc_id=doc_id)
        choices = _literal(rendered, task, "doc_to_choice", doc_id)
        if not isinstance(choices, (list, tuple)):
            raise TaskError(
                f"{_where(task, 'doc_to_choice', doc_id)}: the template {spec!r} rendered "
                f"{rendered!r}, which is not a list. Make it render a list, e.g. '{{{{choices.text}}}}'."
            )
        return list(choices)
    if isinstance(spec, (list, tuple)):
        return list(spec)
    if isinstance(spec, Mapping):
        return list(spec.values())
    if callable(spec) or isinstance(spec, FunctionRef):
        choices = call_task_function(spec, doc, task=task, what="doc_to_choice", doc_id=doc_id, doc=doc)
        return _choice_list(choices, task, f"the function {spec}", doc_id)
    raise _bad_spec(task, "doc_to_choice", spec)


def _choice_list(value: Any, task: TaskConfig, source: str, doc_id: int | None) -> list[Any]:
    """``value`` as a list of choices; a value that is not a collection is a data problem."""
    if isinstance(value, (list, tuple, str, Mapping)):
        return list(value)
    raise DataError(
        f"{_where(task, 'doc_to_choice', doc_id)}: {source} gave {value!r} ({type(value).__name__}), "
        "not a list of choices. Check the document, or point doc_to_choice at a list field."
    )


# what ast.literal_eval raises on text that is not a literal ("{[1]: 2}" is a TypeError)
_LITERAL_ERRORS = (SyntaxError, ValueError, TypeError, MemoryError, RecursionError)


def _literal(text: str, task: TaskConfig, what: str, doc_id: int | None) -> Any:
    try:
        return ast.literal_eval(text)
    except _LITERAL_ERRORS:
        raise TaskError(
            f"{_where(task, what, doc_id)}: the rendered value {text[:200]!r} is not a Python "
            "literal, but lm-eval reads it as one here (a list of choices, or a digit string as a "
            "choice index). Fix the template so it renders a valid literal."
        ) from None


def _refuse_prompt(task: TaskConfig) -> None:
    if task.use_prompt is not None:
        raise TaskError(
            f"task '{task.task}' ({task.source}): use_prompt ({task.use_prompt!r}, promptsource) is "
            "not supported by evalflow. Write the prompt as doc_to_text/doc_to_target templates."
        )


def _bad_spec(task: TaskConfig, what: str, spec: Any) -> TaskError:
    return TaskError(
        f"task '{task.task}' ({task.source}): {what} is {spec!r} ({type(spec).__name__}); allowed "
        "are a field name or Jinja template (string), an int, a list, or a !function reference."
    )


def _where(task: TaskConfig | None, what: str, doc_id: int | None) -> str:
    name = f"task '{task.task}' ({task.source or 'no file'})" if task is not None else "template"
    doc = f", document {doc_id}" if doc_id is not None else ""
    return f"{name}, {what}{doc}"
