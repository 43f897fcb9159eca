"""A partial run's mark in results.json: a run given ``subset=`` (the sequential gate's rounds)
evaluated some documents of its tasks, and must never read as a complete run (``compare``, the
report, trackers and lm-eval's layout all look here).

    >>> partial_marker({"t": (0, 1)}, {"t": {"original": 10, "effective": 2}})
    {'partial': {'t': {'n': 2, 'N': 10}}}
    >>> partial_tasks({"partial": {"t": {"n": 2, "N": 10}}})
    {'t': (2, 10)}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PARTIAL = "partial"  # results.json's key of a partial run (subset=): each task's n of N


def partial_marker(subset: Mapping[str, Any] | None, n_samples: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """``{"partial": {task: {"n": evaluated, "N": selected}}}`` for a run given ``subset`` (the
    gate's rounds): a partial run must never read as a complete one; empty for a whole run."""
    marked = {
        t: {"n": c["effective"], "N": c["original"]}
        for t, c in n_samples.items()
        if t in (subset or {}) and c["effective"] < c["original"]
    }
    return {PARTIAL: marked} if marked else {}


def partial_tasks(results: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """task -> (n, N) for each task a partial run evaluated in part; empty for a complete run."""
    marked = results.get(PARTIAL) or {}
    return {t: (int(v["n"]), int(v["N"])) for t, v in marked.items() if isinstance(v, Mapping)}


def partial_line(results: Mapping[str, Any]) -> str:
    """``partial: arc_easy 128 of 2376, ...`` for a partial run; ``""`` for a complete one."""
    marked = partial_tasks(results)
    return "partial: " + ", ".join(f"{t} {n} of {total}" for t, (n, total) in marked.items()) if marked else ""
