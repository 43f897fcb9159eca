"""Compare the aggregates of two results files: lm-eval 0.4.13's ``results_<date>.json`` and
evalflow's ``results.json`` (the same layout: ``results`` per task and group, ``groups`` for the
groups that aggregate their subtasks).

compare.py checks every document; this checks what is built from them — each task's metric
means and each group's weighted aggregate (``leaderboard_bbh``'s ``acc_norm``) — since a group
can be wrong with every document right (a weight, a subtask left out, a different mean).

    diffs, compared = aggregate_differences(peer_results, evalflow_results)
"""

from __future__ import annotations

import json
import math
from pathlib import Path

IDENTICAL = 1e-9  # the same per-document numbers summed in another order differ by rounding only
LL_TOL = 1e-3  # compare.py's tolerance: a mean of values computed from log-likelihoods (truthfulqa_mc2's
# acc, a perplexity) moves with them, so it agrees within it rather than to the last bit


def metric_values(entry: dict) -> dict[str, float]:
    """``metric,filter`` -> value of one task's or group's results entry (no stderr: bootstrap is
    off on our side, and lm-eval's own stderr is a sampling estimate, not a score)."""
    return {
        key: float(value)
        for key, value in entry.items()
        if "," in key and "_stderr," not in key and isinstance(value, (int, float)) and not isinstance(value, bool)
    }


def aggregate_differences(reference: Path, candidate: Path) -> tuple[list[str], list[str], int]:
    """Lines for the task and group metrics whose values differ beyond LL_TOL (or that the
    candidate lacks), lines for those that agree within LL_TOL but not to rounding, and how many
    values were compared."""
    ref, cand = json.loads(reference.read_text()), json.loads(candidate.read_text())
    diffs, close, compared = [], [], 0
    for section in ("results", "groups"):
        for name, entry in sorted(ref.get(section, {}).items()):
            ours = metric_values(cand.get(section, {}).get(name, {}))
            for key, value in sorted(metric_values(entry).items()):
                compared += 1
                where = f"{section} {name} {key}"
                if key not in ours:
                    diffs.append(f"{where}: lm-eval {value:.6g}, evalflow has no value")
                elif not math.isclose(value, ours[key], rel_tol=IDENTICAL, abs_tol=IDENTICAL):
                    line = f"{where}: lm-eval {value!r}, evalflow {ours[key]!r} (|diff| {abs(value - ours[key]):.2g})"
                    within = abs(value - ours[key]) <= LL_TOL * max(1.0, abs(value))
                    (close if within else diffs).append(line)
    return diffs, close, compared


def groups_of(results: Path) -> list[str]:
    """The groups that a results file aggregates (for the verdict line)."""
    return sorted(json.loads(results.read_text()).get("groups", {}))
