"""Miller's clustered standard error of a mean: against a hand computation, lm-eval's stderr when
every document is its own cluster, and statsmodels' cluster-robust OLS on an intercept."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalflow.scoring.aggregations import mean_stderr
from evalflow.scoring.cluster_stderr import clustered_stderr


def test_hand_computation() -> None:
    # values 1,1 | 0,0 | 1,0 ; mean 1/2, residuals +.5 +.5 | -.5 -.5 | +.5 -.5
    values, clusters = [1, 1, 0, 0, 1, 0], ["p", "p", "q", "q", "r", "r"]
    clt2 = (6 * 0.25) / 5 / 6  # Σ r² / (n-1) / n
    within = 2 * (0.5 * 0.5) + 2 * (0.5 * 0.5) + 2 * (0.5 * -0.5)  # Σ_c Σ_{i≠j} r_i r_j
    assert clustered_stderr(values, clusters) == pytest.approx(math.sqrt(clt2 + within / 36), abs=1e-15)
    assert clustered_stderr(values, clusters) > mean_stderr(values)  # answers agree inside p and q


def test_singletons_are_lm_evals_stderr() -> None:
    rng = np.random.default_rng(0)
    values = [float(v) for v in rng.integers(0, 2, 257)]
    assert clustered_stderr(values, list(range(257))) == pytest.approx(mean_stderr(values), rel=1e-12)
    assert math.isnan(clustered_stderr([1.0], ["a"]))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_matches_statsmodels_cluster_robust_intercept(seed: int) -> None:
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(seed)
    clusters = np.repeat(np.arange(40), rng.integers(1, 6, 40))
    values = (rng.random(len(clusters)) < 0.3 + 0.4 * rng.random(40)[clusters]).astype(float)
    n, g = len(values), 40
    fit = sm.OLS(values, np.ones((n, 1))).fit(cov_type="cluster", cov_kwds={"groups": clusters})
    cr1 = float(fit.bse[0]) ** 2  # G/(G-1) · Σ_c u_c² / n²
    resid = values - values.mean()
    # Miller's variance = statsmodels' without G/(G-1), with its diagonal part taken as n/(n-1)
    miller = cr1 * (g - 1) / g + float(np.sum(resid**2)) * (1 / (n * (n - 1)) - 1 / n**2)
    assert clustered_stderr(values, clusters) == pytest.approx(math.sqrt(miller), rel=1e-10)
