"""The judge parsers: how a judge model's answer becomes a score, one registry of them.

``parser: {type: NAME, ...options}`` in a judge block names a registered factory,
``factory(options, where) -> parse(text) -> float | None``: the factory checks its options when the
task loads (a TaskError naming ``where``), and ``parse`` returns None when the judge's text does not
parse, never a silent 0. The registry is evalflow's one :class:`~evalflow.registry.Registry`: a name
is taken once, so a user parser cannot silently replace ``regex`` under every task that names it.

    >>> parse = JUDGE_PARSERS.get("number")({"max": 5}, "demo")
    >>> parse("Score: 4"), parse("Score: 9"), parse("no idea")
    (4.0, None, None)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from evalflow.errors import TaskError
from evalflow.registry import Registry

Parse = Callable[[str], "float | None"]

JUDGE_PARSERS: Registry[Callable[..., Any]] = Registry(
    "judge_parser",
    error=TaskError,
    noun="component",  # the name comes from a task's YAML, as a metric's
    hint="Use a registered judge_parser name, or register yours with evalflow.register_judge_parser(...) in a "
    "module the run imports first (imports=[my_module] on the command line; from Python, import it).",
)


def register_judge_parser(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``factory(options, where) -> parse``: ``parser: {type: NAME, ...options}`` of a judge
    metric. ``parse(judge_text)`` returns the score, or None when the text does not parse; the
    factory checks the options at load time and raises a TaskError naming ``where``."""
    return JUDGE_PARSERS.register(name)


def judge_parser(entry: Mapping[str, Any]) -> tuple[str, Callable[..., Any]] | None:
    """The registered parser (name, factory) a ``metric_list`` entry's judge block names, read by
    name only (nothing checked or built): what the metrics stage's key hashes the code of."""
    judge = entry.get("judge")
    parser = judge.get("parser") if isinstance(judge, Mapping) else None
    name = parser.get("type") if isinstance(parser, Mapping) else None
    found = JUDGE_PARSERS.find(name) if isinstance(name, str) else None
    return (name, found) if isinstance(name, str) and found is not None else None


def _options(options: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in options:
        if key not in allowed:
            raise TaskError(f"{where}: unknown option '{key}'; this parser takes {', '.join(allowed) or 'no options'}")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


@register_judge_parser("regex")
def regex_parser(options: Mapping[str, Any], where: str) -> Parse:
    """The first match of ``pattern`` (its first group, else the whole match) read as a number,
    or looked up in ``map`` when given (``map: {yes: 1, no: 0}``)."""
    _options(options, ("pattern", "map", "ignore_case"), where)
    pattern = options.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise TaskError(f'{where}.pattern: give the regular expression, e.g. pattern: "Score: (\\\\d+)"')
    try:
        compiled = re.compile(pattern, re.IGNORECASE if options.get("ignore_case") else 0)
    except re.error as exc:
        raise TaskError(
            f"{where}.pattern: {pattern!r} is not a valid regular expression ({exc}); fix it "
            "(in YAML, double quotes need \\\\d for \\d)"
        ) from None
    mapping = _score_map(options.get("map"), f"{where}.map") if "map" in options else None

    def parse(text: str) -> float | None:
        found = compiled.search(text)
        if found is None:
            return None
        value = found.group(1) if compiled.groups else found.group(0)
        return mapping.get(value.strip()) if mapping is not None else _number(value)

    return parse


def _score_map(value: Any, where: str) -> dict[str, float]:
    if (
        not isinstance(value, Mapping)
        or not value
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values())
    ):
        raise TaskError(
            f"{where}: give a non-empty mapping of judge answers to scores, e.g. {{'yes': 1, 'no': 0}}; got {value!r}"
        )
    unquoted = [k for k in value if not isinstance(k, str)]
    if unquoted:
        raise TaskError(
            f"{where}: the judge answers {unquoted!r} are not strings: YAML reads unquoted yes/no, on/off, "
            'true/false and numbers as other types. Quote each answer: {"yes": 1, "no": 0}'
        )
    return {k: float(v) for k, v in value.items()}


@register_judge_parser("choice")
def choice_parser(options: Mapping[str, Any], where: str) -> Parse:
    """The score of the ``choices`` key the judge's answer starts with (after whitespace and
    quotes; ``ignore_case`` by default): ``choices: {A: 1, B: 0}``."""
    _options(options, ("choices", "ignore_case"), where)
    choices = _score_map(options.get("choices"), f"{where}.choices")
    fold = options.get("ignore_case", True)
    by_length = sorted(choices, key=len, reverse=True)  # "yes!" before "y"

    def parse(text: str) -> float | None:
        head = text.strip().strip("\"'*`").strip()
        for key in by_length:
            a, b = (head.lower(), key.lower()) if fold else (head, key)
            if a.startswith(b) and (len(a) == len(b) or not a[len(b)].isalnum()):
                return choices[key]
        return None

    return parse


_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


@register_judge_parser("number")
def number_parser(options: Mapping[str, Any], where: str) -> Parse:
    """The first number in the judge's answer, unparsed when outside ``[min, max]`` if given."""
    _options(options, ("min", "max"), where)
    low, high = options.get("min"), options.get("max")
    for name, bound in (("min", low), ("max", high)):
        if bound is not None and (not isinstance(bound, (int, float)) or isinstance(bound, bool)):
            raise TaskError(f"{where}.{name}: give a number; got {bound!r}")

    def parse(text: str) -> float | None:
        found = _NUMBER.search(text)
        value = float(found.group(0)) if found else None
        if value is None or (low is not None and value < low) or (high is not None and value > high):
            return None
        return value

    return parse
