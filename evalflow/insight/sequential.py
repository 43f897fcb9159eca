"""Anytime-valid confidence intervals for a mean over a finite task, sampled without replacement,
and the sequential release gate's verdict read from them.

A task is a finite population: its N units (documents, or clusters of documents) are evaluated in
a seeded uniformly random order, and the quantity gated is the per-document mean over *all* of
them (the full run's number). The interval after any prefix is the hedged-capital betting
confidence sequence for sampling without replacement (Waudby-Smith & Ramdas, "Estimating means
of bounded random variables by betting", JRSS-B 2024, Sec. 6 / Theorem 3 with their WoR
recentring): for a candidate mean ``m`` of the unit values (scaled to [0, 1]) the mean of the
units not yet seen is ``mu_i(m) = (N m - S_{i-1}) / (N - i + 1)``; the two capitals

    K+_t(m) = prod_i (1 + min(lam_i, c / mu_i(m))       (x_i - mu_i(m)))     bets the mean is above m
    K-_t(m) = prod_i (1 - min(lam_i, c / (1 - mu_i(m))) (x_i - mu_i(m)))     bets it is below m

are nonnegative martingales when ``m`` is the true mean, so by Ville's inequality
``P(sup_t K+_t(m) >= 2 / alpha) <= alpha / 2`` (and the same for K-). The interval keeps the ``m``
neither capital has ever (at any step of the prefix: the running intersection) pushed past
``2 / alpha``, intersected with the logically possible means (what the remaining units could
still be): hence it holds the true mean at every prefix at once with probability >= 1 - alpha,
may be read after every round and stopped on, and at the last unit is the exact mean.

The bets ``lam_i`` are the paper's predictable plug-in, ``sqrt(2 log(2/alpha) / (sigma2_{i-1} n_i))``
with the regularised running variance (prior mean 1/2, variance 1/4, one fake observation),
truncated at ``c / mu_i(m)`` with ``c = 1/2``, tuned for ``n_i = max(i, N / 4)``: a finite task ends
at N, so rather than the ``i log(1 + i)`` schedule meant for an endless stream (the paper's and
``confseq.betting.hedged_cs``'s default), the bets are sized to decide around a quarter of the task
and shrink as ``1/sqrt(i)`` after it. Any predictable bets keep the guarantee; these decide sooner:
in ``benchmarks/gate_simulation.py`` (arc_easy-sized, margin 0.01, a true drop of 0.05) the mean
share of documents used falls from 0.48 to 0.32. Betting rather than the WoR empirical-Bernstein
sequence of the same paper because it is uniformly tighter and, done as below, fast enough: both
capitals are monotone in ``m``, so each bound is a root of one decreasing function, found by
regula falsi from an empirical-Bernstein bracket, in numpy over many prefixes at once
(:func:`prefix_bounds`), which the simulation calls with thousands of simulated runs and
:func:`mean_interval` with one: one decision code. ``confseq`` 0.0.11 (the paper's reference
code) computes over a grid of ``m`` one prefix at a time; ``tests/insight/test_sequential.py``
cross-checks against its ``betting_cs``, with these bets, at every prefix of 24 cases (it does not
install on Python 3.11 with NumPy 2, so it runs in a side venv: ``.ci/confseq_venv.sh``).

Clusters: a cluster of documents is one unit, valued ``y_c = U * sum_c / D`` (U units, D
documents) so that the mean of the ``y_c`` is the per-document mean; its range is the per-document
range scaled by the largest cluster (``U * size * lo / D .. U * size * hi / D``). The logical bound
is taken per document (the remaining documents' values are in ``[lo, hi]``), so the last unit
still gives the exact mean.

The verdict (:func:`gate_verdict`) is two one-sided decisions, each at alpha/2: "fail" when the
whole interval is below ``-max_drop``, "pass" when it is above. At the margin's boundary both are
false claims, so the false-verdict rate is <= alpha. Rows gated together split the budget by
Bonferroni (:func:`row_alpha`: ``alpha / rows``), so the chance that any row's verdict is false
is <= alpha.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from evalflow.errors import ConfigError

TRUNCATION = 0.5  # c: the largest fraction of capital one bet may risk (the paper's choice)
TOLERANCE = 1e-6  # how far below the exact boundary a bound may be, in the [0, 1]-scaled unit value
ROUNDING = 1e-12  # each bound is moved out by this share of the range: float rounding is not evidence
HORIZON = 0.25  # the bets are tuned to decide at a quarter of the units, and stay sound everywhere
CHUNK_ROWS = 64  # prefixes computed together: numpy's temporaries stay in cache


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


@dataclass(frozen=True)
class UnitScale:
    """How one population's units map onto [0, 1]: ``x = (y - low) / (high - low)``, where
    ``y = units * unit_sum / documents`` has the per-document mean as its population mean."""

    units: int
    documents: int
    low: float
    high: float
    value_low: float
    value_high: float


def unit_scale(population_sizes: Sequence[int], value_range: tuple[float, float]) -> UnitScale:
    """The scale of a population of units with these document counts and per-document range."""
    sizes = np.asarray(population_sizes, dtype=np.int64)
    lo, hi = float(value_range[0]), float(value_range[1])
    if sizes.size == 0 or int(sizes.min()) < 1:
        raise ConfigError("sequential interval: every unit needs at least one document (population_sizes)")
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ConfigError(f"sequential interval: value_range={value_range} must be two finite numbers, low < high")
    units, documents = int(sizes.size), int(sizes.sum())
    scale = units / documents
    ends = [scale * int(s) * v for s in (sizes.min(), sizes.max()) for v in (lo, hi)]
    return UnitScale(units, documents, min(ends), max(ends), lo, hi)


def round_sizes(units: int, first: int = 64, growth: float = 1.5) -> tuple[int, ...]:
    """Cumulative numbers of units (documents, or clusters) evaluated after each round: strictly
    increasing, the last equal to ``units``. Rounds grow geometrically so that a clear verdict
    costs a few small rounds, a verdict overshoots the documents it needed by less than
    ``growth`` times, and the number of rounds (each one batched run) grows as log(units)."""
    if units < 1:
        raise ConfigError(f"round sizes: a task with {units} units has nothing to evaluate")
    if first < 1 or not growth > 1.0:
        raise ConfigError(f"round sizes: first={first} must be >= 1 and growth={growth} > 1")
    sizes: list[int] = []
    size = float(first)
    while round(size) < units:
        if not sizes or round(size) > sizes[-1]:
            sizes.append(round(size))
        size *= growth
    return (*sizes, units)


def _bets(x: np.ndarray, alpha_side: float, units: int) -> np.ndarray:
    """The bets ``lam_i`` (rows: runs, columns: steps), each known before ``x_i``: the paper's
    predictable plug-in tuned for a sample of ``max(i, HORIZON * units)`` (see the module docstring)."""
    steps = np.arange(1, x.shape[1] + 1, dtype=np.float64)
    mean = (0.5 + np.cumsum(x, axis=1)) / (steps + 1.0)
    variance = (0.25 + np.cumsum((x - np.minimum(mean, 1.0)) ** 2, axis=1)) / (steps + 1.0)
    previous = np.concatenate([np.full((x.shape[0], 1), 0.25), variance[:, :-1]], axis=1)
    horizon = np.maximum(steps, HORIZON * units)
    return np.sqrt(2.0 * math.log(1.0 / alpha_side) / (horizon * previous))


def _excess(
    x: np.ndarray, bets: np.ndarray, seen_frac: np.ndarray, step_weight: np.ndarray, m: np.ndarray
) -> np.ndarray:
    """The highest log capital, over the prefix, of betting "the mean is above ``m``" (one ``m`` per
    row). ``mu_i(m) = m * step_weight_i - seen_frac_i`` is the mean of the units not yet seen."""
    mu = np.clip(m[:, None] * step_weight - seen_frac, 0.0, 1.0)  # within [0, 1] but for rounding
    with np.errstate(divide="ignore"):
        lam = np.minimum(bets, TRUNCATION / mu)
    return np.asarray(np.cumsum(np.log1p(lam * (x - mu)), axis=1).max(axis=1))


Prefix = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # x, bets, seen_frac, step_weight


def _root(args: Prefix, threshold: float, a: np.ndarray, b: np.ndarray, fa: np.ndarray, fb: np.ndarray) -> np.ndarray:
    """The largest ``m`` known to be rejected (excess ``f >= 0``), within TOLERANCE of the boundary,
    for rows whose ``a`` is rejected and ``b`` is not: the Illinois (modified regula falsi) method on
    the excess capital, which is decreasing in ``m``; it keeps the bracket, so the answer is never
    above the boundary (the interval is never narrower than the capitals allow)."""
    x, bets, seen_frac, weight = args
    kept = np.zeros(a.shape, dtype=np.int8)  # which end the last step kept: -1 a, +1 b
    rows = np.nonzero((b - a) > TOLERANCE)[0]
    packed, at = rows, np.arange(rows.size)  # the rows the packed copies hold; where rows sit in them
    px, pbets, pseen = x[rows], bets[rows], seen_frac[rows]
    while rows.size:
        if rows.size < packed.size // 2:  # repack when half the rows are done
            at = np.searchsorted(packed, rows)
            px, pbets, pseen, packed, at = px[at], pbets[at], pseen[at], rows, np.arange(rows.size)
        ra, rb, fra, frb = a[rows], b[rows], fa[rows], fb[rows]
        c = ra + (rb - ra) * np.clip(fra / (fra - frb), 0.02, 0.98)
        sub = at if at.size < packed.size else slice(None)
        fc = _excess(px[sub], pbets[sub], pseen[sub], weight, c) - threshold
        hit = fc >= 0
        a[rows], b[rows] = np.where(hit, c, ra), np.where(hit, rb, c)
        fa[rows] = np.where(hit, fc, np.where(kept[rows] == -1, fra / 2.0, fra))
        fb[rows] = np.where(hit, np.where(kept[rows] == 1, frb / 2.0, frb), fc)
        kept[rows] = np.where(hit, 1, -1)
        going = (b[rows] - a[rows]) > TOLERANCE
        rows, at = rows[going], at[going]
    return a


def _lower(x: np.ndarray, units: int, alpha_side: float) -> np.ndarray:
    """The anytime-valid lower bound of the [0, 1]-scaled population mean after each row's prefix.

    Two guesses at the empirical-Bernstein distance below the sample mean usually bracket the
    bound (only a speed-up: where they do not, the bracket runs to the logically possible means),
    then :func:`_root` narrows it."""
    t = x.shape[1]
    left = units - np.arange(t, dtype=np.float64)
    seen_frac = (np.cumsum(x, axis=1) - x) / left
    total = seen_frac[:, -1] * left[-1] + x[:, -1]
    low, high = total / units, (total + units - t) / units  # logically possible means
    threshold = math.log(1.0 / alpha_side)
    args = (x, _bets(x, alpha_side, units), seen_frac, units / left)

    def excess(rows: np.ndarray, m: np.ndarray) -> np.ndarray:
        return _excess(x[rows], args[1][rows], seen_frac[rows], args[3], m) - threshold

    radius = np.sqrt(threshold * 2.0 * (x.var(axis=1) + 1.0 / t) / t * max(1.0 - (t - 1) / units, 0.0))
    near = np.clip(x.mean(axis=1) - 0.7 * radius, low, high)
    far = np.clip(x.mean(axis=1) - 1.5 * radius, low, high)
    every = np.arange(x.shape[0])
    f_near, f_far = excess(every, near), excess(every, far)
    above, below = f_near >= 0, f_far < 0
    a, fa, b, fb = far.copy(), f_far.copy(), near.copy(), f_near.copy()  # usual: far rejected, near not
    # above: both rejected, the bound is between near and the highest possible mean
    a[above], fa[above], b[above] = near[above], f_near[above], high[above]
    fb[above] = excess(np.nonzero(above)[0], high[above])
    # below: neither rejected, the bound is between the lowest possible mean and far
    b[below], fb[below], a[below] = far[below], f_far[below], low[below]
    fa[below] = excess(np.nonzero(below)[0], low[below])
    top = fb >= 0  # even the highest possible mean is rejected
    bottom = fa < 0  # nothing is rejected
    a[top], a[bottom] = b[top], low[bottom]
    fa[top], fb[bottom] = fb[top], fa[bottom]
    b[bottom] = low[bottom]
    return _root(args, threshold, a, b, fa, fb)


def prefix_bounds(
    sums: np.ndarray, documents_seen: np.ndarray, scale: UnitScale, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """The (1 - alpha) interval of the per-document population mean for many prefixes at once.

    ``sums``: (runs, t) per-unit sums of the first t units of each run's order;
    ``documents_seen``: (runs,) the documents in those t units. Returns (low, high) arrays. This is
    the one implementation: :func:`mean_interval` is it with one run.
    """
    sums = np.asarray(sums, dtype=np.float64)
    if sums.ndim != 2 or sums.shape[1] == 0:
        raise ConfigError("sequential interval: observe at least one unit before asking for an interval")
    if sums.shape[1] > scale.units:
        raise ConfigError(f"sequential interval: {sums.shape[1]} units observed of a population of {scale.units}")
    if not 0 < alpha < 1:
        raise ConfigError(f"sequential interval: alpha={alpha} must be in (0, 1)")
    width = scale.high - scale.low
    x = np.clip((scale.units * sums / scale.documents - scale.low) / width, 0.0, 1.0)
    if np.any(np.abs(x - (scale.units * sums / scale.documents - scale.low) / width) > 1e-9):
        raise ConfigError(
            "sequential interval: a unit's sum is outside its documents' range "
            f"{scale.value_low:g}..{scale.value_high:g}; "
            "declare the metric's range (value_range) or check the per-document values"
        )
    seen = sums.sum(axis=1)
    rest = scale.documents - np.asarray(documents_seen, dtype=np.float64)
    low, high = np.full(seen.shape, scale.low), np.full(seen.shape, scale.high)
    open_ = rest > 0  # every unit seen: the exact mean below, no betting needed
    rows = np.nonzero(open_)[0]
    for start in range(0, rows.size, CHUNK_ROWS):  # blocks whose temporaries stay in cache
        block = rows[start : start + CHUNK_ROWS]
        low[block] = scale.low + width * _lower(x[block], scale.units, alpha / 2.0)
        high[block] = scale.low + width * (1.0 - _lower(1.0 - x[block], scale.units, alpha / 2.0))
    outward = ROUNDING * (scale.value_high - scale.value_low)  # rounding never narrows the interval
    low = np.maximum(low, (seen + rest * scale.value_low) / scale.documents) - outward
    high = np.minimum(high, (seen + rest * scale.value_high) / scale.documents) + outward
    done = rest <= 0
    low[done] = high[done] = seen[done] / scale.documents
    return low, np.maximum(high, low)


def mean_interval(
    observed_sums: Sequence[float], population_sizes: Sequence[int], value_range: tuple[float, float], alpha: float
) -> Interval:
    """The anytime-valid (1 - alpha) confidence interval for the per-DOCUMENT mean over the whole
    finite population, after observing the first len(observed_sums) units of a uniformly random
    order, sampled WITHOUT replacement. A unit is a document (size 1) or a cluster of documents.
    ``population_sizes``: the document count of EVERY unit of the population, in the seeded order
    (so the observed units are its prefix); ``observed_sums``: the sum of the per-document values in
    each observed unit; ``value_range``: the range of one per-document value ((-1, 1) for a paired
    difference of 0/1 metrics; (lo - hi, hi - lo) for a declared metric range [lo, hi]; (0, 1) for a
    single run's 0/1 metric). With every unit observed it is the exact mean (low == high)."""
    scale = unit_scale(population_sizes, value_range)
    sums = np.asarray(observed_sums, dtype=np.float64)[None, :]
    seen = np.array([sum(int(s) for s in population_sizes[: sums.shape[1]])], dtype=np.float64)
    low, high = prefix_bounds(sums, seen, scale, alpha)
    return Interval(float(low[0]), float(high[0]))


def verdict_codes(low: np.ndarray, high: np.ndarray, max_drop: float) -> np.ndarray:
    """-1 (fail), +1 (pass) or 0 (undecided) per interval: :func:`gate_verdict` over arrays."""
    return np.where(np.asarray(high) < -max_drop, -1, np.where(np.asarray(low) > -max_drop, 1, 0))


def gate_verdict(interval: Interval, max_drop: float) -> Literal["fail", "pass"] | None:
    """On the paired difference oriented so that higher is better (B - A, or A - B for lower-is-better
    metrics): "fail" when interval.high < -max_drop (the drop exceeds max_drop with confidence),
    "pass" when interval.low > -max_drop, None while undecided."""
    code = int(verdict_codes(np.array([interval.low]), np.array([interval.high]), max_drop)[0])
    return "fail" if code < 0 else "pass" if code > 0 else None


def row_alpha(alpha: float, rows: int) -> float:
    """The error budget of one gated row when ``rows`` rows are gated together: Bonferroni,
    ``alpha / rows``, so the chance that any of the rows gets a false verdict is <= alpha whatever
    the dependence between them (they share documents)."""
    if rows < 1:
        raise ConfigError(f"gate: {rows} gated rows; a gate needs at least one row with a per-document metric")
    if not 0 < alpha < 1:
        raise ConfigError(f"gate: alpha={alpha} is out of range; use a level in (0, 1) (alpha=0.05)")
    return alpha / rows
