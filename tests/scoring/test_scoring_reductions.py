"""Reductions of a document's repeats: the estimators against brute force, names, registry."""

from __future__ import annotations

from itertools import combinations
from math import comb

import pytest

from evalflow.errors import TaskError
from evalflow.scoring import REDUCTIONS, RepeatSamples, pass_at_k, register_reduction
from evalflow.scoring.reductions import parse_reductions


@pytest.mark.parametrize("n", range(1, 11))
def test_pass_at_k_is_the_unbiased_estimator_for_every_k_up_to_n(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-12)


def test_pass_at_k_refuses_fewer_samples_than_k() -> None:
    """Undefined for n < k (the product form would say 1.0 for two wrong samples at k=3)."""
    with pytest.raises(ValueError, match="n=2, c=0, k=3"):
        pass_at_k(2, 0, 3)


def test_pass_at_k_is_the_chance_that_k_of_the_n_samples_hold_a_correct_one() -> None:
    """The definition: over every k-subset of the samples, the share that contains a pass."""
    values = (0, 1, 0, 0, 1, 0)
    for k in range(1, 7):
        subsets = list(combinations(values, k))
        share = sum(any(s) for s in subsets) / len(subsets)
        got = REDUCTIONS.get("pass@k")(RepeatSamples(values, values, float), k)
        assert got == pytest.approx(share)


def samples(answers: tuple[str, ...], right: str = "7") -> RepeatSamples:
    return RepeatSamples(answers, tuple(float(a == right) for a in answers), lambda a: float(a == right))


def test_majority_votes_over_answers_then_scores_the_winner() -> None:
    maj = REDUCTIONS.get("maj@k")
    assert maj(samples(("8", "7", "8", "7", "7")), 5) == 1.0
    assert maj(samples(("8", "7", "8", "7", "7")), 4) == 0.0  # a tie among the first 4: first seen wins
    assert maj(samples(("9", "8", "8", "7", "7", "7")), 6) == 1.0


def test_mean_max_first() -> None:
    s = samples(("8", "7", "8", "7"))
    assert [REDUCTIONS.get(n)(s, 4) for n in ("first", "mean", "max")] == [0.0, 0.5, 1.0]


def test_pass_at_k_refuses_a_graded_metric() -> None:
    with pytest.raises(TaskError, match="0 or 1"):
        REDUCTIONS.get("pass@k")(RepeatSamples(("a", "b"), (0.5, 1.0), float), 1)


def test_names_resolve_k_from_repeats_or_the_name() -> None:
    reds = parse_reductions(["pass@k", "pass@2", "maj@k", "mean", "max", "first"], 8, "t.yaml")
    assert [(r.name, r.k, r.output_name("em")) for r in reds] == [
        ("pass@k", 8, "em_pass@8"),
        ("pass@k", 2, "em_pass@2"),
        ("maj@k", 8, "em_maj@8"),
        ("mean", 8, "em_mean@8"),
        ("max", 8, "em_max@8"),
        ("first", 8, "em"),
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("pass@9", "between 1 and the task's repeats (8)"),
        ("pass@0", "between 1 and the task's repeats"),
        ("majority", "unknown reduction 'majority'"),
        ([], "a name or a list of names"),
        (["pass@k", "pass@8"], "pass@8 twice"),
    ],
)
def test_bad_names_name_the_place_and_the_fix(value: object, message: str) -> None:
    with pytest.raises(TaskError, match=r"t\.yaml"):
        parse_reductions(value, 8, "t.yaml")
    with pytest.raises(TaskError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_reductions(value, 8, "t.yaml")


def test_the_registry_refuses_a_second_function_under_a_taken_name() -> None:
    with pytest.raises(TaskError, match="already registered"):
        register_reduction("pass@k")(lambda samples, k: 0.0)


def test_a_user_reduction_is_used_by_name() -> None:
    @register_reduction("median_test@k")
    def median(samples: RepeatSamples, k: int) -> float:
        return sorted(samples.values[:k])[k // 2]

    (red,) = parse_reductions("median_test@3", 4, "t.yaml")
    assert red.output_name("em") == "em_median_test@3"
    assert red(RepeatSamples(("a",) * 4, (0.0, 1.0, 1.0, 0.0), float)) == 1.0
