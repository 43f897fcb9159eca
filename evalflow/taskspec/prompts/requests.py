"""The model requests of one document, as lm-eval 0.4.13's ``construct_requests`` makes them.

- ``multiple_choice``: one loglikelihood request ``(context, target_delimiter + choice)`` per
  choice; for multiple-input tasks one ``(context_i, target_delimiter + target)`` per context;
  plus one unconditional ``("", target_delimiter + choice)`` per choice when ``acc_mutual_info``
  is among the task's metrics (indices continue after the conditional ones).
- ``loglikelihood``: ``(context, target)``, the target without delimiter (lambada puts its own
  leading space in the template).
- ``loglikelihood_rolling``: ``(target,)``.
- ``generate_until``: ``(context, gen_kwargs)``; see :func:`generation_kwargs`.

``repeats`` makes one :class:`Instance` per repeat with the same ``idx`` (lm-eval clones the
request); a seed is attached only to sampled generation, where it changes the answer.

>>> from evalflow.core.records import Context
>>> from evalflow.taskspec.format.spec import TaskConfig
>>> t = TaskConfig(task="t", output_type="generate_until", generation_kwargs={"until": "Q:"})
>>> build_instances(t, 0, {}, Context(0, "Q: 2+2?\\nA:"))[0].request.args[1]
{'until': ['Q:']}
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

from evalflow.core.records import Context, ImageRef, Instance, Request
from evalflow.errors import ConfigError, TaskError
from evalflow.taskspec.format.spec import REQUEST_TYPE, TaskConfig
from evalflow.taskspec.prompts.templates import doc_to_choice, doc_to_target

DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's DEFAULT_MAX_GEN_TOKS


def generation_kwargs(task: TaskConfig, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The generation settings of a ``generate_until`` task, with lm-eval's defaults and a run's overrides.

    lm-eval (``TaskConfig.__post_init__``) gives a task without ``generation_kwargs``
    ``{temperature: 0.0, do_sample: False, max_gen_toks: 256, until: [fewshot_delimiter]}``, adds
    ``until: [fewshot_delimiter]`` when only ``until`` is missing, and reads ``temperature`` as a
    float; ``--gen_kwargs`` then updates that dict key by key. evalflow also turns a string
    ``until`` into a one-element list (lm-eval's models do the same later) and a run's temperature
    into a float, so equal settings make equal, cacheable requests.
    """
    if task.generation_kwargs is None:
        base: dict[str, Any] = {
            "temperature": 0.0,
            "do_sample": False,
            "max_gen_toks": DEFAULT_MAX_GEN_TOKS,
            "until": [task.fewshot_delimiter],
        }
    else:
        where = f"task '{task.task}' ({task.source}) generation_kwargs"
        base = _json_copy(task.generation_kwargs, where, TaskError)
        base.setdefault("until", [task.fewshot_delimiter])
    merged = {**base, **_json_copy(overrides or {}, "the run's gen_kwargs", ConfigError)}
    if "temperature" in merged:
        merged["temperature"] = _as_float(merged["temperature"], task)
    until = merged["until"]
    merged["until"] = [until] if isinstance(until, str) else until
    if not isinstance(merged["until"], list) or not all(isinstance(u, str) for u in merged["until"]):
        raise ConfigError(
            f"task '{task.task}': gen_kwargs 'until' is {until!r}; it must be a string or a list of "
            "strings (the stop sequences)."
        )
    return merged


def is_sampling(gen_kwargs: Mapping[str, Any]) -> bool:
    """Whether generation samples (``do_sample`` or a positive temperature), so repeats can differ."""
    return bool(gen_kwargs.get("do_sample")) or float(gen_kwargs.get("temperature") or 0.0) > 0.0


def uses_mutual_info(task: TaskConfig) -> bool:
    """Whether the task scores ``acc_mutual_info``, which needs unconditional log-likelihoods."""
    return any(m.get("metric") == "acc_mutual_info" for m in task.metric_list or ())


def request_args(
    task: TaskConfig,
    doc_id: int,
    doc: Mapping[str, Any],
    context: Context,
    gen_kwargs: Mapping[str, Any] | None = None,
) -> list[tuple[Any, ...]]:
    """The argument tuples of the document's requests, in lm-eval's order (their ``idx``)."""
    prompt = context.prompt
    kind = task.output_type
    if kind == "multiple_choice":
        delim = task.target_delimiter
        choices = doc_to_choice(task, doc, doc_id=doc_id)
        if isinstance(prompt, tuple):
            target = doc_to_target(task, doc, doc_id=doc_id)
            args = [(ctx, f"{delim}{target}") for ctx in prompt]
        else:
            args = [(prompt, f"{delim}{choice}") for choice in choices]
        if uses_mutual_info(task):
            args += [("", f"{delim}{choice}") for choice in choices]
        return args
    if isinstance(prompt, tuple):
        raise TaskError(
            f"task '{task.task}' ({task.source}): doc_to_text returned a choice index (multiple "
            f"input), which only output_type multiple_choice supports, not {kind}."
        )
    if kind == "loglikelihood":
        return [(prompt, _text_target(task, doc, doc_id))]
    if kind == "loglikelihood_rolling":
        return [(_text_target(task, doc, doc_id),)]
    if kind == "generate_until":
        return [(prompt, generation_kwargs(task, gen_kwargs))]
    raise TaskError(
        f"task '{task.task}' ({task.source}): output_type '{kind}' is not one of multiple_choice, "
        "loglikelihood, loglikelihood_rolling, generate_until. Fix output_type in the task YAML."
    )


def build_instances(
    task: TaskConfig,
    doc_id: int,
    doc: Mapping[str, Any],
    context: Context,
    *,
    gen_kwargs: Mapping[str, Any] | None = None,
    seed: int | None = None,
    visual: tuple[ImageRef, ...] | None = None,
) -> tuple[Instance, ...]:
    """Every request of one document, ``task.repeats`` times each (idx-major, then repeat).

    ``visual``: a multimodal task's images for this document; as in lm-eval, every request's args
    then end with ``{"visual": [...]}`` (references here: their digests key the request)."""
    if not isinstance(task.repeats, int) or task.repeats < 1:
        raise TaskError(f"task '{task.task}' ({task.source}): repeats must be an int >= 1, got {task.repeats!r}")
    all_args = request_args(task, doc_id, doc, context, gen_kwargs)  # refuses an unknown output_type
    rtype = REQUEST_TYPE[task.output_type]
    out = []
    for idx, args in enumerate(all_args):
        if visual is not None:
            args = args + ({"visual": list(visual)},)
        sampled = rtype == "generate_until" and is_sampling(args[1])
        for r in range(task.repeats):
            request = Request(
                rtype,
                args,
                repeat=r,
                seed=seed if sampled else None,
            )
            out.append(Instance(doc_id, idx, request))
    return tuple(out)


def _text_target(task: TaskConfig, doc: Mapping[str, Any], doc_id: int) -> str:
    target = doc_to_target(task, doc, doc_id=doc_id)
    if not isinstance(target, str):
        raise TaskError(
            f"task '{task.task}' ({task.source}), document {doc_id}: doc_to_target gave {target!r}, "
            f"but {task.output_type} scores a text continuation. Make doc_to_target render a string."
        )
    return target


def _json_copy(value: Mapping[str, Any], where: str, error: type[Exception]) -> dict[str, Any]:
    """A deep copy holding only JSON data, so requests hash and cache canonically."""

    def check(v: Any, path: str) -> Any:
        if v is None or isinstance(v, (str, bool, int)):
            return v
        if isinstance(v, float):
            if not math.isfinite(v):
                raise error(f"{where}: '{path}' is {v!r}; use a finite number")
            return v
        if isinstance(v, (list, tuple)):
            return [check(x, f"{path}[{i}]") for i, x in enumerate(v)]
        if isinstance(v, Mapping) and all(isinstance(k, str) for k in v):
            return {k: check(x, f"{path}.{k}") for k, x in v.items()}
        raise error(
            f"{where}: '{path}' is a {type(v).__name__} ({v!r}); generation settings must be JSON "
            "data (strings, numbers, booleans, null, lists, mappings with string keys)."
        )

    return {k: check(copy.deepcopy(v), k) for k, v in value.items()}


def _as_float(value: Any, task: TaskConfig) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(f"task '{task.task}': gen_kwargs temperature {value!r} is not a number")
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"task '{task.task}': gen_kwargs temperature {value!r} is not a number") from None
