"""Per-document scoring (score_document) and metric_list resolution, checked against hand values."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from evalflow.errors import DataError, TaskError
from evalflow.scoring import (
    aggregate_task,
    build_pipelines,
    register_aggregation,
    register_filter,
    register_metric,
    score_document,
    task_metric_specs,
)
from evalflow.scoring.metric_functions import exact_match
from evalflow.taskspec.format.spec import FunctionRef, TaskConfig


def _task(output_type: str, metric_list: list[dict[str, Any]] | None = None, **kw: Any) -> TaskConfig:
    return TaskConfig(task="t", output_type=output_type, metric_list=tuple(metric_list) if metric_list else None, **kw)


MC_ALL = _task(
    "multiple_choice",
    [{"metric": m} for m in ("acc", "acc_norm", "acc_bytes", "exact_match", "f1", "mcc", "brier_score")],
)


def _function(module: Path, attr: str, source: str) -> FunctionRef:
    """A task's ``!function`` reference to ``attr`` of ``module``, written with ``source``."""
    module.write_text(source)
    return FunctionRef(module_path=str(module), attr=attr, source_hash="")


def test_multiple_choice_hand_values() -> None:
    # choice lengths 1 and 10 chars: per-char normalisation flips the prediction to choice 1
    row = score_document(MC_ALL, {}, [(-2.0, True), (-3.0, False)], target=1, choices=["a", "bbbbbbbbbb"])
    assert row["acc"] == 0.0 and row["acc_norm"] == 1.0 and row["acc_bytes"] == 1.0
    assert row["exact_match"] == 0 and row["f1"] == (1, 0) and row["mcc"] == (1, 0)
    p = 1 / (1 + math.exp(-1.0))
    assert row["brier_score"][0] == 1 and row["brier_score"][1] == pytest.approx((p, 1 - p))
    assert list(row) == [
        "acc",
        "f1",
        "mcc",
        "acc_norm",
        "acc_bytes",
        "exact_match",
        "brier_score",
    ]  # lm-eval's order


def test_acc_norm_uses_characters_and_acc_bytes_uses_utf8_bytes() -> None:
    # "éé" is 2 characters but 4 bytes; "abc" is 3 of each
    row = score_document(MC_ALL, {}, [(-2.2, False), (-3.0, False)], target=0, choices=["éé", "abc"])
    assert row["acc_norm"] == 0.0  # -1.1/char vs -1.0/char -> choice 1
    assert row["acc_bytes"] == 1.0  # -0.55/byte vs -1.0/byte -> choice 0


def test_ties_pick_the_first_choice_like_numpy_argmax() -> None:
    task = _task("multiple_choice")
    assert score_document(task, {}, [(-1.0, False)] * 3, target=0, choices=["x", "y", "z"]) == {
        "acc": 1.0,
        "acc_norm": 1.0,
    }
    assert score_document(task, {}, [(-1.0, False)] * 3, target=2, choices=["x", "y", "z"]) == {
        "acc": 0.0,
        "acc_norm": 0.0,
    }


def test_nan_loglikelihood_wins_argmax_like_numpy() -> None:
    task = _task("multiple_choice")
    row = score_document(task, {}, [(-1.0, False), (float("nan"), False)], target=1, choices=["x", "y"])
    assert row == {"acc": 1.0, "acc_norm": 1.0}


def test_pairs_may_arrive_as_lists_after_a_cache_round_trip() -> None:
    as_tuples = score_document(MC_ALL, {}, [(-2.0, True), (-3.0, False)], target="a", choices=["a", "b"])
    as_lists = score_document(MC_ALL, {}, [[-2.0, True], [-3.0, False]], target="a", choices=["a", "b"])
    assert as_tuples == as_lists and as_tuples["acc"] == 1.0


def test_gold_outside_the_choices_scores_zero_with_minus_100() -> None:
    row = score_document(MC_ALL, {}, [(-2.0, True), (-3.0, False)], target="c", choices=["a", "b"])
    assert row["acc"] == 0.0 and row["exact_match"] == 0 and row["f1"] == (-100, 0)


def test_acc_mutual_info_subtracts_the_unconditional_loglikelihoods() -> None:
    task = _task("multiple_choice", [{"metric": "acc"}, {"metric": "acc_mutual_info"}])
    results = [(-4.0, False), (-4.5, False), (-2.0, False), (-3.0, False)]  # conditional, then unconditional
    assert score_document(task, {}, results, target=1, choices=["red", "blue"]) == {
        "acc": 0.0,
        "acc_mutual_info": 1.0,
    }
    with pytest.raises(DataError, match="expected 4 with acc_mutual_info"):
        score_document(task, {}, results[:2], target=1, choices=["red", "blue"])


def test_multiple_targets_count_any_gold() -> None:
    task = _task("multiple_choice", [{"metric": "acc"}, {"metric": "exact_match"}])
    row = score_document(task, {}, [(-4.0, False), (-3.0, True), (-5.0, False)], target=[1, 2], choices=["a", "b", "c"])
    assert row == {"acc": 1.0, "exact_match": 1}


def test_loglikelihood_and_rolling() -> None:
    assert score_document(_task("loglikelihood"), {}, [(-1.5, True)], target=" x", choices=None) == {
        "perplexity": -1.5,
        "acc": 1,
    }
    text = "two  words\nthree"  # re.split(r"\s+") -> 3 words; 16 bytes
    row = score_document(_task("loglikelihood_rolling"), {}, [-9.0], target=text, choices=None)
    assert row == {"word_perplexity": (-9.0, 3), "byte_perplexity": (-9.0, 16), "bits_per_byte": (-9.0, 16)}


def test_generate_until_exact_match_options_and_casts() -> None:
    gsm = _task(
        "generate_until",
        [{"metric": "exact_match", "ignore_case": True, "regexes_to_ignore": [",", "\\$", "(?s).*#### "]}],
    )
    assert score_document(gsm, {}, ["$1,234"], target="so...\n#### 1234", choices=None) == {"exact_match": 1.0}
    plain = _task("generate_until")
    assert score_document(plain, {}, ["42"], target=42, choices=None) == {"exact_match": 1.0}  # gold cast to str
    assert score_document(plain, {}, [""], target="", choices=None) == {"exact_match": 1.0}  # empty generation
    assert score_document(plain, {}, [""], target="x", choices=None) == {"exact_match": 0.0}
    assert score_document(plain, {}, ["beta"], target=1, choices=["alpha", "beta"]) == {"exact_match": 1.0}


def test_exact_match_function_matches_hf_evaluate_semantics() -> None:
    assert exact_match(["Hello, World!"], ["hello world"], ignore_case=True, ignore_punctuation=True) == {
        "exact_match": 1.0
    }
    assert exact_match(["abc123"], ["ABC"], ignore_case=True, ignore_numbers=True) == {"exact_match": 1.0}
    assert exact_match(["a", "b"], ["a", "c"]) == {"exact_match": 0.5}


def test_generate_until_passthrough_metrics_keep_gold_and_prediction() -> None:
    task = _task("generate_until", [{"metric": "bleu"}, {"metric": "chrf"}])
    assert score_document(task, {}, ["a cat"], target="the cat", choices=None) == {
        "bleu": ["the cat", "a cat"],
        "chrf": ["the cat", "a cat"],
    }


def test_process_results_function_ref_is_called_with_doc_and_results(tmp_path: Path) -> None:
    ref = _function(
        tmp_path / "utils.py",
        "score",
        "def score(doc, results):\n    return {'hit': float(results[0] == doc['answer']), 'n': len(results)}\n",
    )
    task = _task(
        "generate_until",
        [{"metric": "hit", "aggregation": "mean", "higher_is_better": True}],
        process_results=ref,
    )
    assert score_document(task, {"answer": "4"}, ["4"], target="4", choices=None) == {"hit": 1.0, "n": 1}
    values, higher = aggregate_task(task, {"none": [{"hit": 1.0, "n": 1}, {"hit": 0.0, "n": 1}]})
    assert values["hit,none"] == 0.5 and values["n,none"] == 1.0 and higher == {"hit": True}


def test_only_requested_metrics_are_returned() -> None:
    task = _task("multiple_choice", [{"metric": "acc_norm"}])
    assert score_document(task, {}, [(-1.0, False), (-2.0, False)], target=0, choices=["a", "b"]) == {"acc_norm": 1.0}


@pytest.mark.parametrize(
    ("metric_list", "message"),
    [
        ([{"metric": "acc_nrom"}], "did you mean 'acc_norm'"),
        ([{"aggregation": "mean"}], "needs a 'metric' key"),
        ([{"metric": "acc", "aggregation": "meen"}], "unknown aggregation 'meen'"),
        ([{"metric": "exact_match", "ignore_cas": True}], "does not take option"),
        (
            [{"metric": "exact_match", "ignore_case": True, "ignore_punctuaton": True}],
            r"does not take option\(s\) ignore_punctuaton "
            r"\('ignore_punctuaton': did you mean 'ignore_punctuation'\?\); it",
        ),
        ([{"metric": "exact_match", "aggregaton": "mean"}], "has a key 'aggregaton'; did you mean 'aggregation'"),
        ([{"metric": "exact_match", "hf_evaluate": True}], "hub"),
    ],
)
def test_bad_metric_lists_are_refused(metric_list: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(TaskError, match=message):
        task_metric_specs(_task("generate_until", metric_list))


def test_a_misspelt_entry_key_is_refused_on_a_multiple_choice_task_too() -> None:
    """multiple_choice scoring passes no options to its metrics, so only this check names the typo."""
    with pytest.raises(TaskError, match="has a key 'higher_is_bettr'; did you mean 'higher_is_better'"):
        task_metric_specs(_task("multiple_choice", [{"metric": "acc", "higher_is_bettr": True}]))


def test_hf_evaluate_is_accepted_where_lm_eval_never_calls_the_hub_metric(tmp_path: Path) -> None:
    """lm-eval's afrimmlu/sib/kobest set `hf_evaluate: true` on multiple_choice `f1`, which its
    scoring computes inline as (gold, pred): the hub metric is loaded but never called."""
    entry = {"metric": "f1", "hf_evaluate": True, "average": "weighted", "aggregation": "f1"}
    assert [s.name for s in task_metric_specs(_task("multiple_choice", [entry]))] == ["f1"]
    ref = FunctionRef(module_path=str(tmp_path / "u.py"), attr="f", source_hash="")
    gen = [{"metric": "f1", "hf_evaluate": True, "aggregation": "mean"}]
    assert [s.name for s in task_metric_specs(_task("generate_until", gen, process_results=ref))] == ["f1"]
    with pytest.raises(TaskError, match="hub"):  # generation without process_results calls it
        task_metric_specs(_task("generate_until", gen))


def test_unregistered_metric_of_process_results_needs_an_aggregation(tmp_path: Path) -> None:
    ref = FunctionRef(module_path=str(tmp_path / "u.py"), attr="f", source_hash="")
    with pytest.raises(TaskError, match="add 'aggregation: mean'"):
        task_metric_specs(_task("generate_until", [{"metric": "score"}], process_results=ref))


def test_registered_metric_aggregation_and_filter_used_from_task_config() -> None:
    @register_aggregation("test_max")
    def test_max(items: list[float]) -> float:
        return max(items)

    @register_metric("test_len_ratio", higher_is_better=False, aggregation="test_max")
    def test_len_ratio(references: list[str], predictions: list[str], scale: float = 1.0) -> float:
        return scale * len(predictions[0]) / len(references[0])

    @register_filter("test_shout")
    def test_shout(resps: list, docs: list) -> list:
        return [[r.upper() + "!" for r in inst] for inst in resps]

    task = _task(
        "generate_until",
        [{"metric": "test_len_ratio", "scale": 2.0}, {"metric": "exact_match"}],
        filter_list=({"name": "loud", "filter": [{"function": "test_shout"}, {"function": "take_first"}]},),
    )
    (pipeline,) = build_pipelines(task.filter_list)
    outputs = pipeline.apply([["ab"], ["abc"]], [{}, {}])
    rows = [score_document(task, {}, [out], target=gold, choices=None) for out, gold in zip(outputs, ["AB!", "abcd"])]
    assert rows == [{"test_len_ratio": 2.0, "exact_match": 1.0}, {"test_len_ratio": 2.0, "exact_match": 0.0}]
    values, higher = aggregate_task(task, {"loud": rows})
    assert values == {
        "test_len_ratio,loud": 2.0,
        "test_len_ratio_stderr,loud": "N/A",  # a user aggregation has no stderr
        "exact_match,loud": 0.5,
        "exact_match_stderr,loud": 0.5,
    }
    assert higher == {"test_len_ratio": False, "exact_match": True}


def test_dict_returning_metric_keys_inherit_its_aggregation(tmp_path: Path) -> None:
    ref = _function(
        tmp_path / "passk.py",
        "pass_at_k",
        "def pass_at_k(references, predictions, k=None):\n"
        "    return {f'pass@{k[0]}': float(predictions[0][0] == 'ok')}\n",
    )
    task = _task(
        "generate_until",
        [{"metric": ref, "aggregation": "median", "higher_is_better": True, "k": [1]}],
        filter_list=({"name": "create_test", "filter": [{"function": "lowercase"}]},),
    )
    rows = [score_document(task, {}, [[g]], target="t", choices=None) for g in ("ok", "no", "ok")]
    assert rows == [{"pass@1": 1.0}, {"pass@1": 0.0}, {"pass@1": 1.0}]
    values, higher = aggregate_task(task, {"create_test": rows}, bootstrap_iters=10)
    assert values["pass@1,create_test"] == 1.0  # the median, not the mean 0.667
    assert higher == {"pass_at_k": True, "pass@1": True}


def test_multiple_choice_without_choices_is_a_task_error() -> None:
    with pytest.raises(TaskError, match="doc_to_choice"):
        score_document(_task("multiple_choice"), {}, [(-1.0, True)], target=0, choices=None)


def test_no_results_is_a_data_error() -> None:
    with pytest.raises(DataError, match="no responses"):
        score_document(_task("generate_until"), {"q": 1}, [], target="x", choices=None)
