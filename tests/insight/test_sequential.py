"""The anytime-valid interval of evalflow.insight.sequential: coverage at every prefix of adversarial
orders, exactness at the last unit, the verdict and the error-budget split."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from evalflow.errors import ConfigError
from evalflow.insight.sequential import Interval, gate_verdict, mean_interval, round_sizes, row_alpha


def covers_every_prefix(values: list[float], sizes: list[int], value_range: tuple[float, float], alpha: float) -> None:
    mean = sum(values) / sum(sizes)
    for t in range(1, len(values) + 1):
        interval = mean_interval(values[:t], sizes, value_range, alpha)
        assert interval.low - 1e-9 <= mean <= interval.high + 1e-9, (t, interval, mean)


def test_random_orders_of_a_sorted_population_are_covered_and_exact_at_the_end() -> None:
    values = [-1.0] * 30 + [0.0] * 100 + [1.0] * 20
    rng = np.random.default_rng(11)
    for _ in range(5):
        covers_every_prefix([float(v) for v in rng.permutation(values)], [1] * len(values), (-1.0, 1.0), 0.001)
    last = mean_interval(values, [1] * len(values), (-1.0, 1.0), 0.05)
    assert last.low == last.high == pytest.approx(sum(values) / len(values))


def test_a_sorted_order_is_not_a_random_one() -> None:
    """The guarantee comes from the seeded shuffle: read in sorted order, the interval leaves the mean."""
    values = sorted([-1.0] * 30 + [0.0] * 100 + [1.0] * 20)
    interval = mean_interval(values[:20], [1] * len(values), (-1.0, 1.0), 0.05)
    assert interval.high < sum(values) / len(values)


def test_the_interval_shrinks_onto_a_clear_drop() -> None:
    rng = np.random.default_rng(3)
    diffs = rng.permutation(np.array([-1.0] * 600 + [1.0] * 50 + [0.0] * 1726))
    interval = mean_interval(list(diffs[:800]), [1] * diffs.size, (-1.0, 1.0), 0.05)
    assert interval.high < -0.1 < -0.01
    assert gate_verdict(interval, 0.01) == "fail"


def test_verdicts_and_budget() -> None:
    assert gate_verdict(Interval(-0.2, -0.05), max_drop=0.01) == "fail"
    assert gate_verdict(Interval(-0.005, 0.03), max_drop=0.01) == "pass"
    assert gate_verdict(Interval(-0.02, 0.03), max_drop=0.01) is None
    assert row_alpha(0.05, 4) == pytest.approx(0.0125)
    with pytest.raises(ConfigError, match="at least one row"):
        row_alpha(0.05, 0)


def test_round_sizes_grow_to_the_last_unit() -> None:
    assert round_sizes(2376) == (64, 128, 256, 512, 1024, 2048, 2376)
    assert round_sizes(10, first=64) == (10,)
    sizes = round_sizes(164, first=16, growth=1.5)
    assert sizes[-1] == 164 and all(a < b for a, b in itertools.pairwise(sizes))
