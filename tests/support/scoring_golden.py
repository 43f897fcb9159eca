"""Shared helpers of the scoring tests: golden files, lm-eval's venv, JSON-normal values."""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path
from typing import Any

SCORING_TESTS = Path(__file__).resolve().parents[1] / "scoring"  # the golden files and lm-eval's side live there
GOLDEN = SCORING_TESTS / "golden"
PEER_PYTHON = Path(os.environ.get("PEER_VENV", Path.home() / ".cache/evalflow-peer/venv")) / "bin" / "python"


def peer_available() -> bool:
    return PEER_PYTHON.exists()


def run_oracle(kind: str, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What lm-eval 0.4.13 itself computes for these cases (runs peer_oracle.py in its venv)."""
    request = json.dumps({"kind": kind, "cases": cases}, allow_nan=True)
    done = subprocess.run(
        [str(PEER_PYTHON), str(SCORING_TESTS / "peer_oracle.py")],
        input=request,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"peer_oracle.py failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def load_golden(kind: str) -> list[dict[str, Any]]:
    return json.loads((GOLDEN / f"{kind}.json").read_text())["cases"]  # type: ignore[no-any-return]


def normal(value: Any) -> Any:
    """The value as JSON would store it (tuples -> lists, numpy -> Python), for comparisons."""
    return json.loads(json.dumps(value, default=_default, allow_nan=True))


def _default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON data: {value!r}")


def same(actual: Any, expected: Any, rel: float = 1e-12) -> bool:
    """Deep equality where floats may differ in the last bits and NaN equals NaN."""
    actual, expected = normal(actual), normal(expected)
    return _same(actual, expected, rel)


def _same(a: Any, b: Any, rel: float) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=rel, abs_tol=1e-15)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, rel) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k], rel) for k in a)
    return a == b  # type: ignore[no-any-return]
