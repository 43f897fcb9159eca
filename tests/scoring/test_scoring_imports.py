"""Imports between the scoring modules point one way, function-level imports included (one of
those hid a metrics ↔ aggregations circle)."""

from __future__ import annotations

from evalflow.cache.code import module_closure
from evalflow.dag.node import EVALFLOW_DIR


def test_scoring_imports_have_no_circle() -> None:
    modules = sorted(
        f"evalflow.scoring.{p.stem}" for p in (EVALFLOW_DIR / "scoring").glob("*.py") if p.stem != "__init__"
    )
    closures = {m: module_closure(m, EVALFLOW_DIR) for m in modules}
    circles = [(a, b) for a in modules for b in closures[a] if b != a and b in closures and a in closures[b]]
    assert circles == []
