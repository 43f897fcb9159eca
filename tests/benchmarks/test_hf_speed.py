"""``benchmarks/hf_speed.py --ablate`` and ``--before``: evalflow against itself with one override, or
against an earlier tree, in the same rounds."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT


@pytest.fixture
def hf_speed(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # the script imports its sibling measured.py
    spec = importlib.util.spec_from_file_location("hf_speed", ROOT / "benchmarks" / "hf_speed.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "hf_speed", module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_ablation_times_both_variants_in_the_same_rounds_and_reports_the_work_ratio(
    hf_speed, tmp_path: Path, monkeypatch
):
    calls = []
    walls = {("gsm8k full", "A"): 60.0, ("gsm8k full", "B"): 70.0, ("gsm8k 1", "A"): 10.0, ("gsm8k 1", "B"): 10.5}

    def fake_measure(a, b, rounds, label):
        calls.append((a, b, rounds))
        key = "gsm8k full" if "limit=30" in label else "gsm8k 1"
        return {"summary": {side: {"min_wall_s": walls[(key, side)], "max_foreign_frac": 0.02} for side in "AB"}}

    monkeypatch.setattr(hf_speed, "measure", fake_measure)
    workload = next(w for w in hf_speed.WORKLOADS if w.name == "gsm8k")
    line = hf_speed.paired_workload(workload, 8, 2, tmp_path, "model.draft_tokens=0", ROOT, ("model.draft_tokens=0",))
    assert line == (
        "gsm8k: inference work evalflow 50.0 s, model.draft_tokens=0 59.5 s: 1.19x the time; "
        "start-up+load 10.0 s against 10.5 s; worst foreign CPU 0.02"
    )
    assert len(calls) == 2 and all(rounds == 2 for *_, rounds in calls)  # interleaved A/B, full and limit=1
    for a, b, _ in calls:
        assert "'model.draft_tokens=0'" in b[-1] and "model.draft_tokens" not in a[-1]
        assert "evalflow" in a[-1] and "peer.sh" not in a[-1] + b[-1]  # evalflow against itself, not lm-eval


def test_before_runs_the_earlier_tree_against_this_one(hf_speed, tmp_path: Path, monkeypatch):
    calls = []

    def fake_measure(a, b, rounds, label):
        calls.append((a, b))
        wall = 30.0 if "limit=500" in label else 10.0
        return {"summary": {side: {"min_wall_s": wall, "max_foreign_frac": 0.0} for side in "AB"}}

    monkeypatch.setattr(hf_speed, "measure", fake_measure)
    before = tmp_path / "before" / "evalflow"
    workload = next(w for w in hf_speed.WORKLOADS if w.name == "arc_easy")
    hf_speed.paired_workload(workload, 8, 1, tmp_path, "evalflow abc123", before, ())
    for a, b in calls:
        assert f"PYTHONPATH={ROOT} " in a[-1] and f"PYTHONPATH={before} " in b[-1]
        assert f"cd {before} " in b[-1] and str(before) not in a[-1]
