"""Aggregations and stderrs: hand values, edge cases, and the bulk bootstrap against lm-eval's loop."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalflow.errors import ConfigError, DataError, TaskError
from evalflow.scoring import aggregate_task, bootstrap
from evalflow.scoring.aggregations import (
    bits_per_byte,
    brier_score,
    f1_score,
    matthews_corrcoef,
    mean,
    median,
    nanmean,
    perplexity,
    stderr_fn,
    weighted_perplexity,
)
from evalflow.taskspec.format.spec import TaskConfig

MC = TaskConfig(task="mc", output_type="multiple_choice")


def lm_eval_bootstrap(f: Callable[[list[Any]], Any], xs: list[Any], iters: int) -> float:
    """lm-eval 0.4.13's ``_bootstrap_internal_no_mp`` + ``sample_stddev``, transcribed literally."""
    res = []
    chunk_size = min(1000, iters)
    for i in range(iters // chunk_size):
        rnd = random.Random(i)
        for _ in range(chunk_size):
            res.append(f(rnd.choices(xs, k=len(xs))))
    mu = sum(res) / len(res)
    return math.sqrt(sum([(x - mu) ** 2 for x in res]) / (len(res) - 1))


def test_hand_values() -> None:
    assert mean([1.0, 0.0, 1.0, 1.0]) == 0.75
    assert median([5.0, 1.0, 3.0, 2.0]) == 3.0  # upper median, no averaging
    assert perplexity([-1.0, -3.0]) == pytest.approx(math.exp(2.0))
    assert weighted_perplexity([(-10.0, 4), (-6.0, 4)]) == pytest.approx(math.exp(2.0))
    assert bits_per_byte([(-math.log(2) * 3, 2), (-math.log(2), 2)]) == pytest.approx(1.0)
    assert nanmean([1.0, float("nan"), 0.0]) == 0.5 and math.isnan(nanmean([float("nan")]))
    assert brier_score([(0, (1.0, 0.0)), (1, (0.5, 0.5))]) == pytest.approx(0.25)


def test_f1_and_mcc_hand_values() -> None:
    pairs = [(1, 1), (1, 0), (0, 1), (0, 0), (1, 1)]  # tp=2 fp=1 fn=1
    assert f1_score(pairs) == pytest.approx(2 / 3)
    # mcc = (tp*tn - fp*fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)) = (2-1)/sqrt(3*3*2*2)
    assert matthews_corrcoef(pairs) == pytest.approx(1 / 6)
    assert f1_score([(0, 0), (0, 0)]) == 0.0 and matthews_corrcoef([(1, 1), (1, 1)]) == 0.0
    with pytest.raises(TaskError, match="binary F1"):
        f1_score([(0, 1), (2, 1), (1, 0)])


def test_stderr_rules() -> None:
    assert stderr_fn(mean, 0) is None  # bootstrap_iters 0: no stderr at all
    assert stderr_fn(weighted_perplexity, 1000) is None  # not bootstrappable in lm-eval
    assert stderr_fn(mean, 10)([1.0, 0.0]) == pytest.approx(0.5)  # closed form: sd/sqrt(n)


@pytest.mark.parametrize(
    ("agg", "items"),
    [
        (median, [round(random.Random(1).gauss(0, 1), 4) for _ in range(17)]),
        (perplexity, [-random.Random(2).uniform(0.1, 3.0) for _ in range(23)]),
        (
            f1_score,
            [(random.Random(3 + i).randint(0, 1), random.Random(99 + i).randint(0, 1)) for i in range(30)],
        ),
        (
            matthews_corrcoef,
            [(random.Random(5 + i).randint(0, 3), random.Random(50 + i).randint(0, 3)) for i in range(30)],
        ),
        (nanmean, [0.5, float("nan"), 0.25, 1.0, 0.0]),
    ],
    ids=["median", "perplexity", "f1", "mcc", "nanmean"],
)
@pytest.mark.parametrize("iters", [1, 250, 1000, 2500])
def test_bulk_bootstrap_equals_lm_eval_loop(agg: Callable[..., Any], items: list[Any], iters: int) -> None:
    expected = lm_eval_bootstrap(agg, items, iters) if iters > 1 else None
    if expected is None:  # one resample: lm-eval divides by zero; evalflow says what to set
        with pytest.raises(ConfigError, match="at least 2"):
            bootstrap.bootstrap_stderr(agg, items, iters)
        return
    actual = bootstrap.bootstrap_stderr(agg, items, iters)
    assert actual == expected or (math.isnan(actual) and math.isnan(expected))


def test_bootstrap_in_memory_blocks_keeps_the_same_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    items = [random.Random(i).random() for i in range(40)]
    whole = bootstrap.bootstrap_stderr(median, items, 1000)
    monkeypatch.setattr(bootstrap, "_MAX_CELLS", 130)  # 3 resamples per block
    assert bootstrap.bootstrap_stderr(median, items, 1000) == whole == lm_eval_bootstrap(median, items, 1000)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=2, max_size=25))
def test_bulk_mcc_equals_scalar_mcc_on_any_labels(pairs: list[tuple[int, int]]) -> None:
    assert bootstrap.bootstrap_stderr(matthews_corrcoef, pairs, 200) == lm_eval_bootstrap(matthews_corrcoef, pairs, 200)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-50, 50, allow_nan=False), min_size=2, max_size=25))
def test_bulk_median_and_perplexity_equal_scalar(values: list[float]) -> None:
    assert bootstrap.bootstrap_stderr(median, values, 200) == lm_eval_bootstrap(median, values, 200)
    neg = [-abs(v) / 10 for v in values]
    assert bootstrap.bootstrap_stderr(perplexity, neg, 200) == lm_eval_bootstrap(perplexity, neg, 200)


def test_aggregate_task_layout_and_order() -> None:
    rows = [{"acc": 1.0, "acc_norm": 1.0}, {"acc": 0.0, "acc_norm": 1.0}, {"acc": 1.0, "acc_norm": 0.0}]
    values, higher = aggregate_task(MC, {"none": rows, "other": rows[:2]})
    assert list(values) == [
        "acc,none",
        "acc_stderr,none",
        "acc_norm,none",
        "acc_norm_stderr,none",
        "acc,other",
        "acc_stderr,other",
        "acc_norm,other",
        "acc_norm_stderr,other",
    ]
    assert values["acc,none"] == pytest.approx(2 / 3)
    assert values["acc_stderr,none"] == pytest.approx(math.sqrt(1 / 3) / math.sqrt(3))
    assert higher == {"acc": True, "acc_norm": True}


def test_single_document_and_zero_iters_give_na() -> None:
    values, _ = aggregate_task(MC, {"none": [{"acc": 1.0, "acc_norm": 0.0}]})
    assert values == {
        "acc,none": 1.0,
        "acc_stderr,none": "N/A",
        "acc_norm,none": 0.0,
        "acc_norm_stderr,none": "N/A",
    }
    values, _ = aggregate_task(MC, {"none": [{"acc": 1.0}, {"acc": 0.0}]}, bootstrap_iters=0)
    assert values == {"acc,none": 0.5, "acc_stderr,none": "N/A"}


def test_metric_list_aggregation_override_and_bleu_cap() -> None:
    task = TaskConfig(
        task="g",
        output_type="generate_until",
        metric_list=(
            {"metric": "exact_match", "aggregation": "median", "higher_is_better": False},
            {"metric": "bleu"},
        ),
    )
    rows = [{"exact_match": float(i % 3), "bleu": (f"ref {i} x", f"ref {i}")} for i in range(6)]
    values, higher = aggregate_task(task, {"none": rows}, bootstrap_iters=1000)
    assert values["exact_match,none"] == 1.0  # median of 0,1,2,0,1,2
    bleu_items = [r["bleu"] for r in rows]
    from evalflow.scoring.aggregations import bleu

    assert values["bleu_stderr,none"] == lm_eval_bootstrap(bleu, bleu_items, 100)  # capped at 100 resamples
    assert higher == {"exact_match": False, "bleu": True}


def test_empty_input_raises_instead_of_scoring_zero() -> None:
    with pytest.raises(DataError, match="nothing"):
        aggregate_task(MC, {})
    with pytest.raises(DataError, match="no documents"):
        aggregate_task(MC, {"none": []})


def test_nan_values_propagate_like_lm_eval() -> None:
    values, _ = aggregate_task(MC, {"none": [{"acc": 1.0}, {"acc": float("nan")}]})
    assert math.isnan(values["acc,none"]) and math.isnan(values["acc_stderr,none"])
