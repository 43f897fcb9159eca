"""Nothing the project ships reaches into the workplace's ``../shared/bench``: the measuring helper
lives in ``benchmarks/measure.py`` (issue 39: two benchmark tests failed on a clone without it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_benchmark_or_test_imports_the_workplace_s_measuring_helper():
    offenders = [
        str(p.relative_to(ROOT))
        for folder in ("benchmarks", "evalflow", "tests")
        for p in (ROOT / folder).rglob("*.py")
        if p.name not in (Path(__file__).name, "measure.py")
        and ('"shared" / "bench"' in p.read_text() or "shared/bench" in p.read_text())
    ]
    assert offenders == []


def test_the_carried_helper_measures_a_command():
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "measure.py"),
            "--rounds",
            "1",
            "--wait-idle",
            "0",
            "--label",
            "true",
            "--",
            "/bin/true",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])["summary"]["A"]
    assert summary["min_wall_s"] > 0 and summary["max_rss_mib"] > 0
