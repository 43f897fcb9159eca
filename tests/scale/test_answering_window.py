"""The manifest's ``inference.answering_seconds``: the wall time replicas spent answering, which
benchmarks/scale.py divides requests by (start-up and model loads are not inference)."""

from __future__ import annotations

import doctest

import pytest

from evalflow.scale import answer_cache
from evalflow.scale.answer_cache import InferenceCounts, union_length


@pytest.mark.parametrize(
    ("intervals", "length"),
    [
        ([], 0.0),
        ([(1.0, 3.0)], 2.0),
        ([(0.0, 2.0), (1.0, 3.0)], 3.0),  # two replicas overlapping: counted once
        ([(0.0, 10.0), (2.0, 3.0)], 10.0),  # nested
        ([(5.0, 6.0), (0.0, 1.0)], 2.0),  # disjoint, out of order (a gap between tasks is not answering)
    ],
)
def test_union_length(intervals: list[tuple[float, float]], length: float) -> None:
    assert union_length(intervals) == pytest.approx(length)


def test_counts_report_the_union_of_answered_chunks() -> None:
    counts = InferenceCounts(answering=[(0.0, 4.0), (1.0, 5.0), (7.0, 8.0)])
    assert counts.answering_seconds == pytest.approx(6.0)


def test_docstring_example() -> None:
    result = doctest.testmod(answer_cache)
    assert result.attempted > 0 and result.failed == 0
