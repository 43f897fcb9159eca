"""benchmarks/gate_simulation.py --quick runs end to end: the table's structure, and null false-verdict
rates whose binomial interval is not above alpha (the full run's acceptance is in benchmarks/RESULTS.md)."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = "gate_simulation.py"  # run from a copy of benchmarks/ with no ../shared (conftest.benchmarks_alone)


def test_the_quick_simulation_prints_every_scenario_and_holds_alpha(benchmarks_alone, tmp_path):
    out = tmp_path / "outcomes.json"
    done = subprocess.run(
        [sys.executable, str(benchmarks_alone / SCRIPT), "--quick", "--only", "arc_easy", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode in (0, 1), done.stderr  # 1: an acceptance line missed at 500 runs
    assert "CPU: " in done.stdout and "wall time" in done.stdout
    report = json.loads(out.read_text())
    rows = {row["scenario"]: row for row in report["outcomes"]}
    assert report["runs"] == 500
    assert {"null: drop = margin", "null: no change", "drop 10x margin", "improvement 2x margin"} <= set(rows)
    for row in rows.values():
        assert row["fail"] + row["passed"] == 1.0
        assert 0.0 < row["mean_fraction"] <= 1.0 and 0.0 < row["p90_fraction"] <= 1.0
        if row["null"]:  # its 95% interval does not lie above alpha
            assert row["false_low"] <= 0.05 and row["false_low"] <= row["false_verdicts"] <= row["false_high"]
    assert rows["drop 10x margin"]["fail"] == 1.0 and rows["drop 10x margin"]["mean_fraction"] < 0.25
    assert rows["null: no change"]["fail"] == 0.0
    assert any(check["text"].startswith("arc_easy, margin 0.01, true drop 0.10") for check in report["checks"])
