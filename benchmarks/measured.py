"""Running ``benchmarks/measure.py`` from a benchmark: A against B, its lines echoed, its
JSON summary returned (the figures every benchmark here reports as a ratio)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

MEASURE = Path(__file__).resolve().with_name("measure.py")


def measure(a: list[str], b: list[str] | None, rounds: int, label: str) -> dict:
    """measure.py's summary of command A against command B (or A alone), interleaved over ``rounds``."""
    cmd = [sys.executable, str(MEASURE), "--rounds", str(rounds), "--label", label, "--", *a]
    cmd += ["--vs", "--", *b] if b else []
    proc = subprocess.run(cmd, capture_output=True, text=True)
    for line in proc.stdout.strip().splitlines()[:-1]:
        print(f"    {line}", flush=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{label} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
