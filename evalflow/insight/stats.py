"""Paired tests of "is B different from A on the same documents".

- :func:`mcnemar_exact`: for 0/1 scores (acc, exact_match): only discordant documents count; under
  the null each is equally likely to favour A or B, so the two-sided p-value is the exact binomial
  one, ``min(1, 2 * P(Binomial(b + c, 1/2) <= min(b, c)))`` (statsmodels' ``mcnemar(exact=True)``).
- :func:`fisher_exact`: for two shares over independent samples (the truncated generations of two
  runs): the two-sided exact p-value of the 2x2 table (scipy's ``fisher_exact``).
- :func:`paired_bootstrap`: for any per-document score: documents are resampled with replacement
  (the same documents for A and B), ``iters`` times from ``numpy.random.default_rng(seed)``; the
  95% interval is the 2.5/97.5 percentiles of the resampled mean difference (scipy's
  ``bootstrap(paired=True, method="percentile")`` draws the same resamples), and the p-value is the
  smallest level at which that percentile interval excludes 0: ``min(1, 2 * min(P(d* <= 0), P(d* >= 0)))``.

- :func:`cluster_bootstrap` and :func:`clustered_mcnemar`: the same questions for a task whose
  documents share passages (``cluster_key``): clusters are resampled whole, and a cluster's
  discordant documents count as one (Durkalski et al. 2003); see docs/correlated-documents.md.

    >>> mcnemar_exact([1, 1, 0, 0], [1, 1, 0, 0])
    1.0
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evalflow.errors import ConfigError

MAX_CELLS = 4_000_000  # resample indices drawn at once (32 MB): bounds memory on large tasks


def is_binary(values: Sequence[float]) -> bool:
    return all(v in (0, 1) for v in values)


def discordant(a: Sequence[float], b: Sequence[float]) -> tuple[int, int]:
    """(documents A got right and B wrong, documents B got right and A wrong)."""
    only_a = sum(1 for x, y in zip(a, b) if x == 1 and y == 0)
    only_b = sum(1 for x, y in zip(a, b) if x == 0 and y == 1)
    return only_a, only_b


def mcnemar_exact(a: Sequence[float], b: Sequence[float]) -> float:
    """The exact (binomial) McNemar p-value for paired 0/1 scores."""
    try:
        from scipy.stats import binom
    except ImportError:
        raise ConfigError('the exact McNemar test needs scipy: pip install "evalflow[insight]"') from None

    only_a, only_b = discordant(a, b)
    n = only_a + only_b
    if n == 0:
        return 1.0
    return float(min(1.0, 2.0 * binom.cdf(min(only_a, only_b), n, 0.5)))


def fisher_exact(hit_a: int, miss_a: int, hit_b: int, miss_b: int) -> float:
    """The two-sided p-value of Fisher's exact test that A's and B's shares of hits are equal."""
    try:
        from scipy.stats import fisher_exact as fisher
    except ImportError:
        raise ConfigError('Fisher\'s exact test needs scipy: pip install "evalflow[insight]"') from None

    return float(fisher(np.array([[hit_a, miss_a], [hit_b, miss_b]]))[1])


@dataclass(frozen=True)
class Bootstrap:
    low: float
    high: float
    p_value: float
    distribution: np.ndarray  # the resampled mean differences (B - A)


def batch_rows(n_docs: int, iters: int) -> int:
    """Resamples drawn per call of the generator (what scipy calls ``batch``)."""
    return max(1, min(iters, MAX_CELLS // max(n_docs, 1)))


def paired_bootstrap(a: Sequence[float], b: Sequence[float], iters: int, seed: int, level: float = 0.95) -> Bootstrap:
    """Percentile interval and p-value of mean(B) - mean(A) over documents resampled in pairs."""
    if iters < 1:
        raise ConfigError(f"bootstrap_iters={iters}: a paired bootstrap needs at least 1 resample (10000 is usual)")
    diff = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    n = len(diff)
    rng = np.random.default_rng(seed)
    rows = batch_rows(n, iters)
    parts = []
    for start in range(0, iters, rows):
        idx = rng.integers(0, n, (min(rows, iters - start), n))
        parts.append(diff[idx].mean(axis=-1))
    dist = np.concatenate(parts)
    alpha = (1.0 - level) / 2.0
    low, high = np.percentile(dist, [alpha * 100.0, (1.0 - alpha) * 100.0])
    p = min(1.0, 2.0 * min(float(np.mean(dist <= 0)), float(np.mean(dist >= 0))))
    return Bootstrap(float(low), float(high), p, dist)


def cluster_bootstrap(
    a: Sequence[float], b: Sequence[float], clusters: Sequence[int], iters: int, seed: int, level: float = 0.95
) -> Bootstrap:
    """:func:`paired_bootstrap` with whole clusters resampled: ``clusters[i]`` (0..K-1) is document
    i's cluster; each resample draws K clusters with replacement and takes the per-document mean
    difference over the documents they hold (the sum of their differences over the sum of their
    sizes, as lm-eval's mean over the pooled documents is). With every document its own cluster it
    draws what :func:`paired_bootstrap` draws."""
    if iters < 1:
        raise ConfigError(f"bootstrap_iters={iters}: a cluster bootstrap needs at least 1 resample (10000 is usual)")
    diff = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    index = np.asarray(clusters, dtype=np.int64)
    k = int(index.max()) + 1
    sums = np.bincount(index, weights=diff, minlength=k)
    sizes = np.bincount(index, minlength=k).astype(np.float64)
    rng = np.random.default_rng(seed)
    rows = batch_rows(k, iters)
    parts = []
    for start in range(0, iters, rows):
        idx = rng.integers(0, k, (min(rows, iters - start), k))
        parts.append(sums[idx].sum(axis=-1) / sizes[idx].sum(axis=-1))
    dist = np.concatenate(parts)
    alpha = (1.0 - level) / 2.0
    low, high = np.percentile(dist, [alpha * 100.0, (1.0 - alpha) * 100.0])
    p = min(1.0, 2.0 * min(float(np.mean(dist <= 0)), float(np.mean(dist >= 0))))
    return Bootstrap(float(low), float(high), p, dist)


def clustered_mcnemar(a: Sequence[float], b: Sequence[float], clusters: Sequence[int]) -> float:
    """Durkalski et al. (2003)'s McNemar test for clustered 0/1 pairs: with ``b_k`` and ``c_k`` the
    documents of cluster k that only A and only B got right, ``X² = (Σ_k (b_k - c_k))² / Σ_k
    (b_k - c_k)²``, chi-square with one degree of freedom under the null. With every document its
    own cluster it is McNemar's chi-square statistic ``(b - c)² / (b + c)``; a cluster whose
    documents flip together counts as one large discordance, not as many independent ones. Chosen
    over Obuchowski (1998)'s variant because it reduces to McNemar's own statistic for singletons
    and needs no per-cluster concordant counts."""
    try:
        from scipy.stats import chi2
    except ImportError:
        raise ConfigError('the clustered McNemar test needs scipy: pip install "evalflow[insight]"') from None

    only_a = np.asarray([x == 1 and y == 0 for x, y in zip(a, b)], dtype=np.float64)
    only_b = np.asarray([x == 0 and y == 1 for x, y in zip(a, b)], dtype=np.float64)
    per_cluster = np.bincount(np.asarray(clusters, dtype=np.int64), weights=only_a - only_b)
    denominator = float(np.sum(per_cluster**2))
    if denominator == 0:
        return 1.0
    return float(chi2.sf(float(np.sum(per_cluster)) ** 2 / denominator, 1))
