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

The bets ``lam_i`` are the predictable-mixture empirical-Bernstein ones of the paper (and of its
reference code, ``confseq.betting.hedged_cs``): ``sqrt(2 log(2/alpha) / (sigma2_{i-1} i log(1+i)))``
with the regularised running variance (prior mean 1/2, variance 1/4, one fake observation),
truncated at ``c = 1/2``. Betting rather than the WoR empirical-Bernstein sequence because it is
uniformly tighter and, done as below, fast enough: both capitals are monotone in ``m``, so each
bound is a bisection, and every step of it is numpy over many prefixes at once
(:func:`prefix_bounds`), which the simulation in ``benchmarks/gate_simulation.py`` calls with
thousands of simulated runs, and :func:`mean_interval` with one: one decision code.
``confseq`` itself does not install here (its C++ part needs Boost) and computes over a grid of
``m`` one prefix at a time; ``tests/insight/test_sequential.py`` cross-checks against it where it
does install.

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
TOLERANCE = 1e-7  # the bisection's width, in units of the [0, 1]-scaled unit value


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


def round_sizes(units: int, first: int = 64, growth: float = 2.0) -> tuple[int, ...]:
    """Cumulative numbers of units (documents, or clusters) evaluated after each round: strictly
    increasing, the last equal to ``units``. Rounds grow geometrically so that a clear verdict
    costs a few small rounds and an unclear one no more than ``growth`` times the rounds it
    needed (each round is one batched run)."""
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


def _bets(x: np.ndarray, alpha_side: float) -> np.ndarray:
    """The predictable-mixture bets ``lam_i`` (rows: runs, columns: steps), known before ``x_i``."""
    steps = np.arange(1, x.shape[1] + 1, dtype=np.float64)
    mean = (0.5 + np.cumsum(x, axis=1)) / (steps + 1.0)
    variance = (0.25 + np.cumsum((x - np.minimum(mean, 1.0)) ** 2, axis=1)) / (steps + 1.0)
    previous = np.concatenate([np.full((x.shape[0], 1), 0.25), variance[:, :-1]], axis=1)
    return np.sqrt(2.0 * math.log(1.0 / alpha_side) / (steps * np.log1p(steps) * previous))


def _rejected(
    x: np.ndarray,
    bets: np.ndarray,
    seen_before: np.ndarray,
    left: np.ndarray,
    units: int,
    m: np.ndarray,
    threshold: float,
) -> np.ndarray:
    """Whether the capital betting "the mean is above ``m``" ever reached ``threshold`` (log)."""
    mu = (units * m[:, None] - seen_before) / left
    with np.errstate(divide="ignore"):
        lam = np.minimum(bets, TRUNCATION / mu)
    log_capital = np.cumsum(np.log1p(lam * (x - mu)), axis=1)
    return np.asarray(log_capital.max(axis=1) >= threshold)


def _lower(x: np.ndarray, units: int, alpha_side: float) -> np.ndarray:
    """The anytime-valid lower bound of the [0, 1]-scaled population mean after each row's prefix."""
    t = x.shape[1]
    seen_before = np.cumsum(x, axis=1) - x
    left = units - np.arange(t, dtype=np.float64)
    total = seen_before[:, -1] + x[:, -1]
    low, high = total / units, (total + units - t) / units  # logically possible means
    bets = _bets(x, alpha_side)
    threshold = math.log(1.0 / alpha_side)
    top = _rejected(x, bets, seen_before, left, units, high, threshold)
    live = ~top & _rejected(x, bets, seen_before, left, units, low, threshold)
    xl, bl, sl = x[live], bets[live], seen_before[live]
    a, b = low[live], high[live]
    while a.size and float(np.max(b - a)) > TOLERANCE:
        mid = (a + b) / 2.0
        hit = _rejected(xl, bl, sl, left, units, mid, threshold)
        a, b = np.where(hit, mid, a), np.where(hit, b, mid)
    out = low.copy()
    out[top] = high[top]
    out[live] = a
    return out


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
    low = scale.low + width * _lower(x, scale.units, alpha / 2.0)
    high = scale.low + width * (1.0 - _lower(1.0 - x, scale.units, alpha / 2.0))
    seen = sums.sum(axis=1)
    rest = scale.documents - np.asarray(documents_seen, dtype=np.float64)
    low = np.maximum(low, (seen + rest * scale.value_low) / scale.documents)
    high = np.minimum(high, (seen + rest * scale.value_high) / scale.documents)
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
