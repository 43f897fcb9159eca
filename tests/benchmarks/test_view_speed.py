"""benchmarks/view_speed.py runs end to end over run folders given to it: a server started per
round, every timing and its baseline printed (the suite-scale figures are in the reply to issue 54
and the script's own run; here the runs are the toy ones)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.runs import Runner
from tests.support.toy_tasks import write_toy_library

SCRIPT = "view_speed.py"  # run from a copy of benchmarks/ with no ../shared (conftest.benchmarks_alone)


def test_the_timings_over_given_runs(benchmarks_alone: Path, tmp_path: Path) -> None:
    lib = write_toy_library(tmp_path)
    runner = Runner(lib, tmp_path / "cache", tmp_path / "one")
    _, _, big = runner(["toy_mc", "toy_gen"], model="dummy")
    runner.out = tmp_path / "sweep"
    for salt in ("a", "b"):
        runner("toy_mc", model="dummy", limit=10, overrides=[f"model.salt={salt}"])
    done = subprocess.run(
        [
            sys.executable,
            str(benchmarks_alone / SCRIPT),
            "--mmlu",
            str(big),
            "--sweep",
            str(tmp_path / "sweep"),
            "--rounds",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    largest = max(big.glob("samples_*.jsonl"), key=lambda p: p.stat().st_size).stem.removeprefix("samples_")
    assert "\n3 runs (" in done.stdout and f"samples of {largest};" in done.stdout, done.stdout
    for label in ("first /api/runs", "first samples page (cold)", "next samples page (warm)", "text search (warm)"):
        assert re.search(rf"{re.escape(label)} +\d+\.\d+ s +\(\d+\.\d+x ", done.stdout), (label, done.stdout)
    assert re.search(r"peak RSS of the server +\d+ MB", done.stdout)
