"""The anytime-valid interval of evalflow.insight.sequential: coverage at every prefix of the gate's
shuffle of adversarially arranged populations, exactness at the last unit, the verdict and the
error-budget split, and a cross-check against the paper's reference code (confseq)."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from evalflow.errors import ConfigError
from evalflow.insight.sequential import (
    Interval,
    gate_verdict,
    mean_interval,
    prefix_bounds,
    round_sizes,
    row_alpha,
    unit_scale,
)


def misses(values: list[float], sizes: list[int], value_range: tuple[float, float], alpha: float) -> list[int]:
    """The prefixes whose interval leaves out the population's per-document mean."""
    mean = sum(values) / sum(sizes)
    out = []
    for t in range(1, len(values) + 1):
        interval = mean_interval(values[:t], sizes, value_range, alpha)
        if not interval.low - 1e-9 <= mean <= interval.high + 1e-9:
            out.append(t)
    return out


def arranged(kind: str, size: int, discordant: int, drop: int) -> list[float]:
    """A paired population of {-1, 0, 1} laid out adversarially: sorted, or every discordant one first."""
    losses = (discordant + drop) // 2
    values = [-1.0] * losses + [1.0] * (discordant - losses) + [0.0] * (size - discordant)
    return {"ascending": sorted(values), "descending": sorted(values, reverse=True), "discordant first": values}[kind]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    kind=st.sampled_from(["ascending", "descending", "discordant first"]),
    size=st.integers(2, 120),
    share=st.floats(0.0, 1.0),
    lean=st.floats(-1.0, 1.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_prefix_of_the_gates_shuffle_covers_the_mean(
    kind: str, size: int, share: float, lean: float, seed: int
) -> None:
    """However the task's file orders its documents, the seeded shuffle makes every prefix's
    interval hold the full-population mean (alpha = 0.001: a miss here is a 1-in-1000 event)."""
    discordant = round(share * size)
    drop = round(lean * discordant)
    drop -= (drop - discordant) % 2
    values = arranged(kind, size, discordant, drop)
    order = np.random.default_rng(seed).permutation(size)
    assert misses([values[i] for i in order], [1] * size, (-1.0, 1.0), 0.001) == []


@settings(max_examples=25, deadline=None, derandomize=True)
@given(passages=st.lists(st.tuples(st.integers(1, 6), st.sampled_from([-1, 0, 1])), min_size=1, max_size=40))
def test_clusters_of_correlated_documents_are_covered(passages: list[tuple[int, int]]) -> None:
    """Clusters as units (a passage lost or won whole): every prefix covers the per-document mean."""
    sizes = [size for size, _ in passages]
    sums = [float(size * sign) for size, sign in passages]
    order = np.random.default_rng(len(passages)).permutation(len(passages))
    assert misses([sums[i] for i in order], [sizes[i] for i in order], (-1.0, 1.0), 0.001) == []


def test_coverage_over_many_shuffles_is_at_least_one_minus_alpha() -> None:
    """The guarantee itself: over 400 shuffles of a sorted population, the share of runs whose
    interval ever leaves out the mean (at any of the rounds) is not above alpha = 0.1."""
    values = np.array(sorted([-1.0] * 60 + [1.0] * 20 + [0.0] * 320))
    rng = np.random.default_rng(5)
    runs = np.stack([rng.permutation(values) for _ in range(400)])
    scale = unit_scale([1] * values.size, (-1.0, 1.0))
    ever_missed = np.zeros(len(runs), dtype=bool)
    for t in (8, 16, 32, 64, 128, 256, 399):
        low, high = prefix_bounds(runs[:, :t], np.full(len(runs), float(t)), scale, 0.1)
        ever_missed |= (low > values.mean()) | (high < values.mean())
    # rate <= alpha, tested at the 0.1% level (Ville's bound is nearly tight here: about 0.085)
    assert ever_missed.sum() <= binom.ppf(0.999, len(runs), 0.1)


def test_a_sorted_order_is_not_a_random_one() -> None:
    """The guarantee comes from the seeded shuffle: read in sorted order, the interval leaves the mean."""
    values = sorted([-1.0] * 30 + [0.0] * 100 + [1.0] * 20)
    interval = mean_interval(values[:20], [1] * len(values), (-1.0, 1.0), 0.05)
    assert interval.high < sum(values) / len(values)


def test_the_last_unit_gives_the_exact_mean() -> None:
    values = [-1.0] * 30 + [0.0] * 100 + [1.0] * 20
    last = mean_interval(values, [1] * len(values), (-1.0, 1.0), 0.05)
    assert last.low == last.high == pytest.approx(sum(values) / len(values))
    clusters = mean_interval([3.0, -2.0, 0.5], [4, 5, 2], (-1.0, 1.0), 0.05)
    assert clusters.low == clusters.high == pytest.approx(1.5 / 11)


def test_the_interval_shrinks_onto_a_clear_drop() -> None:
    rng = np.random.default_rng(3)
    diffs = rng.permutation(np.array([-1.0] * 600 + [1.0] * 50 + [0.0] * 1726))
    interval = mean_interval(list(diffs[:800]), [1] * diffs.size, (-1.0, 1.0), 0.05)
    assert interval.high < -0.1 < -0.01
    assert gate_verdict(interval, 0.01) == "fail"


def test_bad_values_are_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError, match="outside its documents' range"):
        mean_interval([2.0], [1, 1], (-1.0, 1.0), 0.05)
    with pytest.raises(ConfigError, match="value_range"):
        mean_interval([0.5], [1, 1], (1.0, 1.0), 0.05)


def test_verdicts_and_budget() -> None:
    assert gate_verdict(Interval(-0.2, -0.05), max_drop=0.01) == "fail"
    assert gate_verdict(Interval(-0.005, 0.03), max_drop=0.01) == "pass"
    assert gate_verdict(Interval(-0.02, 0.03), max_drop=0.01) is None
    assert gate_verdict(Interval(-0.01, -0.01), max_drop=0.01) is None  # exactly at the margin: the full run decides
    assert row_alpha(0.05, 4) == pytest.approx(0.0125)
    with pytest.raises(ConfigError, match="at least one row"):
        row_alpha(0.05, 0)


def test_round_sizes_grow_to_the_last_unit() -> None:
    assert round_sizes(2376, growth=2.0) == (64, 128, 256, 512, 1024, 2048, 2376)
    assert round_sizes(10, first=64) == (10,)
    sizes = round_sizes(164, first=16, growth=1.5)
    assert sizes[-1] == 164 and all(a < b for a, b in itertools.pairwise(sizes))
    with pytest.raises(ConfigError, match="growth"):
        round_sizes(100, growth=1.0)


# Runs in confseq's side venv (.ci/confseq_venv.sh): reads the cases as JSON on stdin, each with
# evalflow's bets (predictable: the bet of step i reads only the steps before it, so one array per
# case serves every prefix and every candidate mean), prints confseq's bounds at every prefix.
_CONFSEQ_SCRIPT = """
import json, sys
import numpy as np
from confseq.betting import betting_cs
out = []
for case in json.load(sys.stdin):
    x, bets = np.array(case["x"]), np.array(case["bets"])
    def fn(data, m, bets=bets):
        return bets[: len(data)]
    low, high = betting_cs(x, [fn], [fn], alpha=case["alpha"], N=case["size"], breaks=case["breaks"],
                           running_intersection=True, theta=0.5, parallel=False)
    out.append([list(map(float, low)), list(map(float, high))])
print(json.dumps(out))
"""


def confseq_python() -> Path:
    """The side venv holding confseq (``CONFSEQ_VENV``, default ``~/.cache/evalflow-confseq/venv``)."""
    venv = Path(os.environ.get("CONFSEQ_VENV", Path.home() / ".cache/evalflow-confseq/venv"))
    python = venv / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"confseq's side venv is not built ({venv}; bash .ci/confseq_venv.sh builds it, .ci/run does)")
    return python


def test_the_bounds_agree_with_confseq_on_a_grid() -> None:
    """confseq (Waudby-Smith & Ramdas' reference code) with the same bets, truncation and
    hedging, over its grid of candidate means: the bounds agree to the grid's resolution at every
    prefix of 24 cases (sizes, value mixes, seeds, alphas)."""
    from evalflow.insight import sequential

    python, breaks, cases = confseq_python(), 2000, []
    for size, share, seed, alpha in itertools.product((40, 300), (0.1, 0.5, 0.9), (1, 2), (0.05, 0.2)):
        rng = np.random.default_rng(seed)
        x = rng.permutation((rng.random(size) < share).astype(float) * 0.5 + rng.random(size) * 0.5)[: size // 2]
        bets = sequential._bets(x[None, :], alpha / 2.0, size)[0]
        cases.append({"x": x.tolist(), "bets": bets.tolist(), "alpha": alpha, "size": size, "breaks": breaks})
    done = subprocess.run(
        [str(python), "-c", _CONFSEQ_SCRIPT], input=json.dumps(cases), capture_output=True, text=True, check=True
    )
    compared = 0
    for case, (ref_low, ref_high) in zip(cases, json.loads(done.stdout), strict=True):
        x, scale = np.array(case["x"]), unit_scale([1] * case["size"], (0.0, 1.0))
        for t in range(1, len(x) + 1):
            low, high = prefix_bounds(x[None, :t], np.array([float(t)]), scale, case["alpha"])
            assert math.isclose(low[0], ref_low[t - 1], abs_tol=2.5 / breaks), (case["size"], case["alpha"], t)
            assert math.isclose(high[0], ref_high[t - 1], abs_tol=2.5 / breaks), (case["size"], case["alpha"], t)
            compared += 1
    assert compared == 12 * 20 + 12 * 150  # every prefix of every case
