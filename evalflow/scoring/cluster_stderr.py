"""The cluster-robust standard error of a mean (Miller 2024, "Adding error bars to evals", eq. 4).

With per-document scores ``s_i``, their mean ``s̄`` over ``n`` documents and clusters ``c``::

    SE_clustered = sqrt( SE_CLT² + 1/n² · Σ_c Σ_{i∈c} Σ_{j∈c, j≠i} (s_i - s̄)(s_j - s̄) )

where ``SE_CLT = sqrt(Σ_i (s_i - s̄)² / (n - 1) / n)`` is lm-eval's ``mean_stderr`` (the sample
standard deviation over √n). The double sum is the within-cluster covariance the plain error
ignores: ``Σ_c (Σ_{i∈c} (s_i - s̄))² - Σ_i (s_i - s̄)²``. With every document its own cluster it is
0 and the clustered error equals lm-eval's, digit for digit; with the answers of one passage all
right or all wrong it grows by about the square root of the cluster size.

statsmodels' cluster-robust OLS on an intercept (``cov_type="cluster"``, CR1) is the sandwich
``G/(G-1) · 1/n² · Σ_c (Σ_{i∈c} (s_i - s̄))²`` with ``G`` clusters; Miller's equation differs from it
only in the small-sample factors (``n/(n-1)`` on the diagonal part, no ``G/(G-1)``), and
``tests/scoring/test_cluster_stderr.py`` checks the two against each other.

    >>> round(clustered_stderr([1, 0, 1, 0], ["a", "b", "c", "d"]), 6)  # singletons: lm-eval's
    0.288675
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from evalflow.scoring import lazy_numpy as np  # a cached run imports no numpy


def clustered_stderr(values: Sequence[float], clusters: Sequence[Hashable]) -> float:
    """Miller's clustered standard error of ``mean(values)``; ``clusters[i]`` is document i's
    cluster. NaN with fewer than two documents (lm-eval's stderr is undefined there too)."""
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    if n != len(clusters):
        raise ValueError(f"{n} values but {len(clusters)} cluster ids")
    if n < 2:
        return math.nan
    resid = x - x.mean()
    _, index = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    sums = np.bincount(index, weights=resid)
    within = float(np.sum(sums**2) - np.sum(resid**2))  # Σ_c Σ_{i≠j∈c} r_i r_j
    clt = float(np.sum(resid**2)) / (n - 1) / n
    return math.sqrt(max(clt + within / n**2, 0.0))


def cluster_count(clusters: Sequence[Hashable]) -> int:
    return len(set(clusters))
