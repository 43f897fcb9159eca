"""Filters: named pipelines that turn raw model answers into the values metrics compare.

A task's ``filter_list`` (lm-eval's format) names pipelines of steps; each step is a registered
filter applied to the whole task at once, ``fn(resps, docs, **kwargs)``, where ``resps[i]`` is the
current value of lm-eval instance ``i`` (at first: the list of its responses, one per repeat) and
``docs[i]`` its document. Without a ``filter_list`` the single pipeline ``"none"`` keeps the first
response, as lm-eval does::

    >>> pipe, = build_pipelines([{"name": "strict-match", "filter": [
    ...     {"function": "regex", "regex_pattern": "#### (\\\\-?[0-9\\\\.\\\\,]+)"},
    ...     {"function": "take_first"}]}])
    >>> pipe.apply([["so 3 + 4 = 7\\n#### 7"], ["I think 12"]], [{}, {}])
    ('7', '[invalid]')
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalflow.errors import DataError, TaskError
from evalflow.scoring.registry import FILTERS, register_filter
from evalflow.taskspec.format.spec import FunctionRef, TaskConfig

Resps = list[Any]


@register_filter("take_first")
def take_first(resps: Resps, docs: Sequence[Mapping[str, Any]]) -> Resps:
    """Each instance's first response: collapses the list of repeats to one value."""
    return [r[0] for r in resps]


@register_filter("take_first_k")
def take_first_k(resps: Resps, docs: Sequence[Mapping[str, Any]], *, k: int) -> Resps:
    if resps and len(resps[0]) < k:
        raise TaskError(
            f"filter take_first_k needs at least k={k} responses per document but got "
            f"{len(resps[0])}; raise the task's 'repeats' to at least {k}"
        )
    return [r[:k] for r in resps]


@register_filter("majority_vote")
def majority_vote(resps: Resps, docs: Sequence[Mapping[str, Any]]) -> Resps:
    """The most frequent response (first seen wins a tie), kept as a one-element list."""
    return [[Counter(r).most_common(1)[0][0]] for r in resps]


@register_filter("remove_whitespace")
def remove_whitespace(resps: Resps, docs: Sequence[Mapping[str, Any]]) -> Resps:
    return [[r.strip() for r in inst] for inst in resps]


@register_filter("lowercase")
def lowercase(resps: Resps, docs: Sequence[Mapping[str, Any]]) -> Resps:
    return [[r.lower() for r in inst] for inst in resps]


@register_filter("uppercase")
def uppercase(resps: Resps, docs: Sequence[Mapping[str, Any]]) -> Resps:
    return [[r.upper() for r in inst] for inst in resps]


@register_filter("map")
def map_values(
    resps: Resps,
    docs: Sequence[Mapping[str, Any]],
    *,
    mapping_dict: Mapping[Any, Any] | None = None,
    default_value: Any = None,
) -> Resps:
    """Each response replaced by ``mapping_dict[response]``, else ``default_value``."""
    table = mapping_dict or {}
    return [[table.get(r, default_value) for r in inst] for inst in resps]


@register_filter("custom")
def custom(resps: Resps, docs: Sequence[Mapping[str, Any]], *, filter_fn: Callable[..., Any]) -> Any:
    """``filter_fn(resps, docs)``: a task's own function (``filter_fn: !function utils.f``)."""
    return filter_fn(resps, docs)


@register_filter("regex")
def regex(
    resps: Resps,
    docs: Sequence[Mapping[str, Any]],
    *,
    regex_pattern: str = r"#### (\-?[0-9\.\,]+)",
    group_select: int = 0,
    fallback: str = "[invalid]",
) -> Resps:
    """The ``group_select``-th match of the pattern in each response (first non-empty group), else
    ``fallback``; a non-string response counts as the empty string."""
    pattern = re.compile(regex_pattern)
    return [[_extract(pattern, r, group_select, fallback) for r in inst] for inst in resps]


def _extract(pattern: re.Pattern[str], resp: Any, group_select: int, fallback: str) -> str:
    matches = pattern.findall(resp if isinstance(resp, str) else "")
    if not matches:
        return fallback
    match = _select(matches, group_select, pattern, resp)
    if isinstance(match, tuple):
        groups = [m for m in match if m]
        match = groups[0] if groups else fallback
    return str(match.strip())


def _select(matches: list[Any], group_select: int, pattern: re.Pattern[str], resp: Any) -> Any:
    try:
        return matches[group_select]
    except IndexError:
        raise TaskError(
            f"filter regex: group_select={group_select} but pattern {pattern.pattern!r} matched only "
            f"{len(matches)} time(s) in the response {resp!r}; use 0 (first) or -1 (last)"
        ) from None


@functools.cache
def _punctuation_table() -> dict[int, None]:
    return dict.fromkeys(i for i in range(sys.maxunicode) if unicodedata.category(chr(i)).startswith("P"))


@register_filter("multi_choice_regex")
def multi_choice_regex(
    resps: Resps,
    docs: Sequence[Mapping[str, Any]],
    *,
    regex_pattern: str = r"#### (\-?[0-9\.\,]+)",
    group_select: int = 0,
    fallback: str = "[invalid]",
    ignore_case: bool = False,
    ignore_punctuation: bool = False,
    regexes_to_ignore: Sequence[str] | None = None,
) -> Resps:
    """A letter answer ``(A)``, ``(B)``, ...: the pattern, else a choice's text found in the response,
    else ``: B`` style letters; needs a ``choices`` field in each document (lm-eval's filter)."""
    pattern = re.compile(regex_pattern)

    def ignores(text: str) -> str:
        for ignored in regexes_to_ignore or ():
            text = re.sub(ignored, "", text)
        text = text.lower() if ignore_case else text
        return text.translate(_punctuation_table()) if ignore_punctuation else text

    def find(rx: re.Pattern[str], resp: Any, convert: Mapping[str, str]) -> str:
        matches = rx.findall(resp if isinstance(resp, str) else "")
        if not matches:
            return ""
        match = _select(matches, group_select, rx, resp)
        if isinstance(match, tuple):
            match = next((m for m in match if m), "")
        match = match.strip()
        return convert.get(match, match) if match else match

    out = []
    for inst, doc in zip(resps, docs, strict=True):
        texts = [ignores(c.strip()) for c in _choices(doc)]
        letters = [chr(ord("A") + i) for i in range(len(texts))]
        by_text = {t: f"({a})" for t, a in zip(texts, letters)}
        # Longest first: alternation is leftmost-wins, so "Guilty" must not shadow "Guilty of X".
        text_rx = re.compile("|".join(sorted((re.escape(t) for t in texts), key=len, reverse=True)))
        letter_rx = re.compile(rf":[\s]*({'|'.join(letters)})")
        by_letter = {a: f"({a})" for a in letters}
        row = []
        for resp in inst:
            match = find(pattern, resp, {}) or find(text_rx, ignores(resp), by_text)
            match = match or find(letter_rx, resp, by_letter)
            row.append(match or fallback)
        out.append(row)
    return out


def _choices(doc: Mapping[str, Any]) -> list[str]:
    try:
        return list(doc["choices"])
    except (KeyError, TypeError):
        raise DataError(
            "filter multi_choice_regex reads the answer options from each document's 'choices' "
            f"field, but a document has none (keys: {sorted(doc) if isinstance(doc, Mapping) else doc!r}); "
            "add it in process_docs or use the 'regex' filter"
        ) from None


@dataclass(frozen=True)
class FilterStep:
    """One step of a pipeline: a filter function and its keyword arguments from the YAML."""

    function: str
    fn: Callable[..., Any]
    kwargs: tuple[tuple[str, Any], ...] = ()

    def __call__(self, resps: Resps, docs: Sequence[Mapping[str, Any]]) -> Resps:
        return list(self.fn(resps, docs, **dict(self.kwargs)))


@dataclass(frozen=True)
class FilterPipeline:
    """A named chain of filter steps; its name is the ``filter`` part of ``"acc,none"``."""

    name: str
    steps: tuple[FilterStep, ...]

    def apply(self, resps: Sequence[Sequence[Any]], docs: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
        """The filtered value of each instance, given all responses (repeats) of each instance."""
        if len(resps) != len(docs):
            raise ValueError(f"filter '{self.name}': {len(resps)} response lists for {len(docs)} documents")
        values: Resps = [list(r) for r in resps]
        for step in self.steps:
            try:
                values = step(values, docs)
            except (TypeError, IndexError, AttributeError, KeyError, ValueError) as exc:
                raise TaskError(
                    f"filter pipeline '{self.name}', step '{step.function}', failed on these responses "
                    f"({type(exc).__name__}: {exc}); check the step's options and that the steps before "
                    "it leave values of the kind it expects (e.g. take_first collapses repeats to one)"
                ) from exc
            if len(values) != len(docs):
                raise TaskError(
                    f"filter pipeline '{self.name}', step '{step.function}', returned {len(values)} "
                    f"values for {len(docs)} instances; a filter must return one value per instance"
                )
        return tuple(values)


CROSS_SAMPLE_FILTERS = frozenset({"take_first_k", "majority_vote"})
"""Filters that read several repeats of an instance at once, so a pipeline using one cannot score
each sample on its own (lm-eval's self-consistency pipelines: its own maj@k over repeats)."""


def combines_samples(pipeline: FilterPipeline) -> bool:
    """Whether the pipeline looks across an instance's repeats (then it has no per-sample answers)."""
    return any(step.function in CROSS_SAMPLE_FILTERS for step in pipeline.steps)


def per_sample(
    pipeline: FilterPipeline, resps: Sequence[Sequence[Any]], docs: Sequence[Mapping[str, Any]]
) -> tuple[tuple[Any, ...], ...]:
    """Each instance's repeats filtered one at a time: ``out[i][j]`` is repeat j of instance i
    through the pipeline as if it were the only response (one pipeline call per repeat index)."""
    repeats = {len(r) for r in resps}
    if len(repeats) > 1:
        raise DataError(f"filter '{pipeline.name}': instances have different numbers of repeats {sorted(repeats)}")
    k = repeats.pop() if repeats else 0
    columns = [pipeline.apply([[r[j]] for r in resps], docs) for j in range(k)]
    return tuple(tuple(col[i] for col in columns) for i in range(len(resps)))


DEFAULT_PIPELINES = (FilterPipeline("none", (FilterStep("take_first", take_first),)),)


def task_pipelines(task: TaskConfig) -> tuple[FilterPipeline, ...]:
    """The task's filter pipelines, where a name evalflow's registry lacks may be a filter class the
    task's own code registered in lm-eval's registry (:func:`task_code_filters`)."""
    return build_pipelines(task.filter_list, task_code_filters(task))


def task_code_filters(task: TaskConfig) -> Mapping[str, type]:
    """The filters the task's modules registered in lm-eval's registry, asked for (importing the
    task code) only when its ``filter_list`` names a filter evalflow's registry does not have."""
    if not any(isinstance(n, str) and n not in FILTERS for n in filter_names(task.filter_list)):
        return {}
    from evalflow.taskspec.format.taskcode import task_code_filters as registered

    return registered(task)


def filter_names(filter_list: Any) -> list[Any]:
    """The ``function`` of every step of a (possibly malformed) ``filter_list``, in order."""
    names = []
    for entry in filter_list if isinstance(filter_list, (list, tuple)) else ():
        steps = entry.get("filter") if isinstance(entry, Mapping) else None
        for step in steps if isinstance(steps, (list, tuple)) else ():
            names.append(step.get("function") if isinstance(step, Mapping) else None)
    return names


def build_pipelines(
    filter_list: Sequence[Mapping[str, Any]] | None, task_filters: Mapping[str, type] | None = None
) -> tuple[FilterPipeline, ...]:
    """A task's filter pipelines; ``None`` gives lm-eval's default ``"none"`` = take_first.
    ``task_filters`` holds the names its task code registered in lm-eval's registry."""
    if filter_list is None:
        return DEFAULT_PIPELINES
    if len(filter_list) == 0:
        raise TaskError("filter_list is empty, so no response would be scored; remove the key or add a pipeline")
    pipelines = tuple(_pipeline(i, entry, task_filters or {}) for i, entry in enumerate(filter_list))
    names = [p.name for p in pipelines]
    for name in names:
        if names.count(name) > 1:
            raise TaskError(f"filter_list names the pipeline '{name}' twice; give each pipeline its own name")
    return pipelines


def _pipeline(index: int, entry: Any, task_filters: Mapping[str, type]) -> FilterPipeline:
    where = f"filter_list[{index}]"
    if not isinstance(entry, Mapping) or "name" not in entry or "filter" not in entry:
        raise TaskError(f"{where} must be a mapping with 'name' and 'filter' (a list of steps), got {entry!r}")
    steps = entry["filter"]
    if isinstance(steps, (str, Mapping)) or not isinstance(steps, Sequence) or not steps:
        raise TaskError(f"{where} ('{entry['name']}'): 'filter' must be a non-empty list of steps")
    return FilterPipeline(
        str(entry["name"]), tuple(_step(f"{where}.filter[{j}]", s, task_filters) for j, s in enumerate(steps))
    )


def _step(where: str, step: Any, task_filters: Mapping[str, type]) -> FilterStep:
    if not isinstance(step, Mapping) or "function" not in step:
        raise TaskError(f"{where} must be a mapping with a 'function' key (a filter name), got {step!r}")
    kwargs = {k: _resolve(v) for k, v in step.items() if k != "function"}
    function = step["function"]
    target = (
        _resolve(function)
        if isinstance(function, FunctionRef) or callable(function)
        else FILTERS.find(str(function)) or task_filters.get(str(function)) or FILTERS.get(str(function), where=where)
    )
    label = str(function) if isinstance(function, str) else getattr(target, "__name__", str(function))
    fn = _class_filter(target) if isinstance(target, type) else target
    _check_signature(fn, target, kwargs, label, where)
    if "regex_pattern" in kwargs:
        _compile(kwargs["regex_pattern"], where)
    for ignored in kwargs.get("regexes_to_ignore") or ():
        _compile(ignored, where)
    return FilterStep(label, fn, tuple(kwargs.items()))


def _class_filter(cls: type) -> Callable[..., Any]:
    """lm-eval's filter classes: a fresh instance per application, ``cls(**kwargs).apply(resps, docs)``."""

    def apply(resps: Resps, docs: Sequence[Mapping[str, Any]], **kwargs: Any) -> Any:
        return cls(**kwargs).apply(resps, docs)

    apply.__name__ = cls.__name__
    return apply


def _check_signature(fn: Callable[..., Any], target: Any, kwargs: Mapping[str, Any], label: str, where: str) -> None:
    try:
        if isinstance(target, type):
            inspect.signature(target).bind(**kwargs)
        else:
            inspect.signature(fn).bind(None, None, **kwargs)
    except TypeError as exc:
        raise TaskError(
            f"{where}: filter '{label}' cannot take these options ({exc}); fix the keys of that step"
        ) from None
    except ValueError:  # no inspectable signature: let the call itself decide
        pass


def _compile(pattern: Any, where: str) -> None:
    try:
        re.compile(pattern)
    except (re.error, TypeError) as exc:
        raise TaskError(f"{where}: {pattern!r} is not a valid regular expression ({exc})") from None


def _resolve(value: Any) -> Any:
    if isinstance(value, FunctionRef):
        from evalflow.taskspec.format.loader import resolve_function

        return resolve_function(value)
    return value
