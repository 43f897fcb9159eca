"""Group aggregation: weighted and unweighted means, pooled stderrs, filter discovery, errors."""

from __future__ import annotations

import math

import pytest

from evalflow.errors import DataError, TaskError
from evalflow.scoring import aggregate_group

A = ({"acc,none": 0.5, "acc_stderr,none": 0.05}, 100)
B = ({"acc,none": 0.8, "acc_stderr,none": 0.02}, 300)


def test_weight_by_size_vs_plain_mean() -> None:
    weighted = aggregate_group("g", [{"metric": "acc"}], [A, B])
    assert weighted["acc,none"] == pytest.approx((0.5 * 100 + 0.8 * 300) / 400)
    pooled = math.sqrt(((99 * 0.05**2 * 100) + (299 * 0.02**2 * 300)) / (400 - 2) / 400)
    assert weighted["acc_stderr,none"] == pytest.approx(pooled)
    plain = aggregate_group("g", [{"metric": "acc", "weight_by_size": False}], [A, B])
    assert plain["acc,none"] == pytest.approx(0.65)
    assert plain["acc_stderr,none"] == pytest.approx(math.sqrt(0.05**2 + 0.02**2) / 2)


def test_equal_sizes_make_both_means_agree() -> None:
    same_size = [(A[0], 200), (B[0], 200)]
    w = aggregate_group("g", [{"metric": "acc"}], same_size)
    u = aggregate_group("g", [{"metric": "acc", "weight_by_size": False}], same_size)
    assert w["acc,none"] == pytest.approx(u["acc,none"])


def test_na_stderr_and_missing_members() -> None:
    members = [
        ({"acc,none": 0.5, "acc_stderr,none": "N/A"}, 10),
        ({"acc,none": 0.7, "acc_stderr,none": 0.1}, 10),
        ({}, 10),
    ]
    assert aggregate_group("g", [{"metric": "acc"}], members) == {"acc,none": 0.6, "acc_stderr,none": "N/A"}
    assert aggregate_group("g", [{"metric": "f1", "filter_list": ["none"]}], members) == {}


def test_a_member_judge_result_without_value_is_skipped_and_all_without_value_is_null() -> None:
    """A judge metric none of whose verdicts parsed is reported ``None`` by its task (not absent)."""
    some = [({"j,none": None, "j_stderr,none": "N/A"}, 10), ({"j,none": 4.0, "j_stderr,none": 0.1}, 10)]
    assert aggregate_group("g", [{"metric": "j"}], some)["j,none"] == 4.0
    none = [({"j,none": None, "j_stderr,none": "N/A"}, 10), ({"j,none": None, "j_stderr,none": "N/A"}, 5)]
    assert aggregate_group("g", [{"metric": "j"}], none) == {"j,none": None, "j_stderr,none": "N/A"}


def test_filters_are_discovered_sorted_when_not_listed() -> None:
    members = [({"em,strict": 1.0, "em_stderr,strict": 0.0, "em,flex": 0.5, "em_stderr,flex": 0.1}, 4)]
    assert list(aggregate_group("g", [{"metric": "em"}], members)) == [
        "em,flex",
        "em_stderr,flex",
        "em,strict",
        "em_stderr,strict",
    ]
    assert list(aggregate_group("g", [{"metric": "em", "filter_list": "strict"}], members)) == [
        "em,strict",
        "em_stderr,strict",
    ]


def test_no_aggregate_metric_list_means_no_numbers() -> None:
    assert aggregate_group("g", None, [A]) == {} and aggregate_group("g", [], [A]) == {}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"metric": "acc", "aggregation": "median"}, "only group aggregation"),
        ({"metric": "acc", "weight_by_sizes": True}, "did you mean 'weight_by_size'"),
        ({"filter_list": ["none"]}, "'metric' key"),
        ({"metric": "acc", "weight_by_size": "yes"}, "true or false"),
    ],
)
def test_bad_entries_are_refused(entry: dict, message: str) -> None:
    with pytest.raises(TaskError, match=message):
        aggregate_group("g", [entry], [A])


def test_no_members_is_an_error() -> None:
    with pytest.raises(DataError, match="no member"):
        aggregate_group("g", [{"metric": "acc"}], [])
