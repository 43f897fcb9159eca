"""The generic registry: lookups, did-you-mean errors, collisions."""

from __future__ import annotations

import pytest

from evalflow.errors import TaskError
from evalflow.scoring import AGGREGATIONS, FILTERS, METRICS, Registry, register_metric


def test_register_get_names_and_contains() -> None:
    reg: Registry[int] = Registry("widget")
    reg.register("one")(1)
    reg.add("two", 2)
    assert reg.get("one") == 1 and reg.find("three") is None
    assert reg.names() == ("one", "two") and "two" in reg and len(reg) == 2


def test_unknown_name_error_names_the_place_and_the_nearest() -> None:
    reg: Registry[int] = Registry("widget")
    reg.add("alpha", 1)
    with pytest.raises(TaskError, match=r"task.yaml: unknown widget 'alpah'; did you mean 'alpha'"):
        reg.get("alpah", where="task.yaml")


def test_collisions_are_refused_but_re_registration_is_not() -> None:
    reg: Registry[object] = Registry("widget")

    def f() -> None: ...

    reg.add("f", f)
    reg.add("f", f)  # the same object again: fine
    with pytest.raises(TaskError, match="already registered"):
        reg.add("f", lambda: None)


def test_builtin_components_are_registered() -> None:
    assert {"acc", "acc_norm", "exact_match", "bleu", "f1", "mcc", "word_perplexity"} <= set(METRICS.names())
    assert {
        "mean",
        "median",
        "perplexity",
        "weighted_perplexity",
        "bits_per_byte",
        "f1",
        "matthews_corrcoef",
    } <= set(AGGREGATIONS.names())
    assert {"take_first", "regex", "majority_vote", "multi_choice_regex", "custom", "map"} <= set(FILTERS.names())
    assert METRICS.get("acc_norm").aggregation == "mean" and METRICS.get("ter").higher_is_better is False


def test_register_metric_checks_its_aggregation_and_output_types() -> None:
    with pytest.raises(TaskError, match="unknown aggregation"):
        register_metric("test_bad_agg", higher_is_better=True, aggregation="avg")
    with pytest.raises(TaskError, match="unknown output type"):
        register_metric("test_bad_type", higher_is_better=True, aggregation="mean", output_types="generate")
