"""Token counts of generations, in one shape wherever they are kept: a task's ``generations``
figures (:mod:`evalflow.output.generations`), what the inference edge computed in a run
(:class:`evalflow.scale.answer_cache.InferenceCounts`) and the run's totals
(:mod:`evalflow.output.cost`).

A count is ``{"prompt", "completion", "reasoning", "counted"}``: tokens summed over the
generations whose backend reported them (``counted``: how many reported a completion count). A
kind no generation reported is None, not 0, so "not reported" never reads as "free".
``completion`` includes ``reasoning`` (every generated token, the thinking's too), as the served
APIs' ``usage`` counts them.

    >>> a = token_totals([Finish(prompt_tokens=10, completion_tokens=4)])
    >>> b = token_totals([Finish(prompt_tokens=7, completion_tokens=3, reasoning_tokens=2), Finish()])
    >>> add_tokens(a, b)
    {'prompt': 17, 'completion': 7, 'reasoning': 2, 'counted': 2}
    >>> less_tokens(add_tokens(a, b), a)
    {'prompt': 7, 'completion': 3, 'reasoning': 2, 'counted': 1}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from evalflow.core.records import Finish

TOKEN_KINDS: tuple[str, ...] = ("prompt", "completion", "reasoning")


def token_totals(finishes: Iterable[Finish]) -> dict[str, Any]:
    """Prompt, completion and reasoning tokens summed over the generations that report them."""
    listed = list(finishes)

    def total(values: list[int | None]) -> int | None:
        known = [v for v in values if v is not None]
        return sum(known) if known else None

    return {
        "prompt": total([f.prompt_tokens for f in listed]),
        "completion": total([f.completion_tokens for f in listed]),
        "reasoning": total([f.reasoning_tokens for f in listed]),
        "counted": sum(1 for f in listed if f.completion_tokens is not None),
    }


def add_tokens(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two counts as one: each kind summed, None only where neither reported it."""
    out: dict[str, Any] = {
        kind: None if a.get(kind) is None and b.get(kind) is None else (a.get(kind) or 0) + (b.get(kind) or 0)
        for kind in TOKEN_KINDS
    }
    out["counted"] = a.get("counted", 0) + b.get("counted", 0)
    return out


def less_tokens(total: Mapping[str, Any], part: Mapping[str, Any]) -> dict[str, Any]:
    """What ``total`` holds beyond ``part`` (a run's tokens beyond those it computed: the cached)."""
    out: dict[str, Any] = {
        kind: None if total.get(kind) is None else total[kind] - (part.get(kind) or 0) for kind in TOKEN_KINDS
    }
    out["counted"] = total.get("counted", 0) - part.get("counted", 0)
    return out
