"""Aggregations: many per-document values -> one task number, and that number's standard error.

Each aggregation is a small registered function, with lm-eval 0.4.13's name and arithmetic (the
same operation order, so the same float bits). :func:`stderr_fn` says how each one's standard
error is estimated: closed-form for ``mean``, a seeded bootstrap for the aggregations lm-eval
bootstraps (see :mod:`evalflow.scoring.registry` to add your own) and none otherwise. Applying
them to a task's metrics is :mod:`evalflow.scoring.task_aggregation`::

    >>> from evalflow.scoring.aggregations import mean, median
    >>> mean([1.0, 0.0, 1.0, 1.0]), median([3.0, 1.0, 2.0])
    (0.75, 2.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from evalflow.errors import TaskError
from evalflow.scoring import bootstrap
from evalflow.scoring import lazy_numpy as np
from evalflow.scoring.bootstrap import bootstrap_stderr, mean, sample_stddev
from evalflow.scoring.registry import register_aggregation

register_aggregation("mean")(mean)


def mean_stderr(arr: Sequence[float]) -> float:
    """Closed-form standard error of a mean (sample standard deviation over sqrt(n))."""
    return sample_stddev(arr) / math.sqrt(len(arr))


@register_aggregation("bypass")
def bypass(arr: Sequence[Any]) -> int:
    """lm-eval's placeholder for metrics that are only logged, never aggregated."""
    return 999


@register_aggregation("nanmean")
def nanmean(arr: Sequence[float]) -> float:
    if len(arr) == 0 or all(np.isnan(arr)):
        return float("nan")
    return float(np.nanmean(arr))


@register_aggregation("median")
def median(arr: Sequence[Any]) -> Any:
    """The upper median, as lm-eval: ``sorted(arr)[n // 2]`` (no averaging of the middle pair)."""
    return sorted(arr)[len(arr) // 2]


@register_aggregation("perplexity")
def perplexity(items: Sequence[float]) -> float:
    return math.exp(-mean(items))


def weighted_mean(items: Sequence[Sequence[float]]) -> float:
    a, b = zip(*items)
    return float(sum(a) / sum(b))


@register_aggregation("weighted_perplexity")
def weighted_perplexity(items: Sequence[Sequence[float]]) -> float:
    """``exp(-sum(loglikelihood) / sum(words or bytes))`` over ``(loglikelihood, weight)`` pairs."""
    return math.exp(-weighted_mean(items))


@register_aggregation("bits_per_byte")
def bits_per_byte(items: Sequence[Sequence[float]]) -> float:
    return -weighted_mean(items) / math.log(2)


@register_aggregation("f1")
def f1_score(items: Sequence[Sequence[Any]]) -> float:
    """Binary F1 of label 1 over ``(gold, pred)`` pairs, as scikit-learn's ``f1_score`` computes it."""
    golds, preds = _pairs(items, "f1")
    labels = set(golds) | set(preds)
    if len(labels) > 2 or (1 not in labels and len(labels) >= 2):
        raise TaskError(
            f"metric 'f1' is binary F1 of label 1, but the (gold, prediction) pairs hold the labels "
            f"{sorted(labels, key=repr)}; use it only on two-choice tasks (choice 1 = positive), "
            "or use 'mcc' or 'acc' for more choices"
        )
    tp = sum(1 for g, p in zip(golds, preds) if g == 1 and p == 1)
    true_sum = sum(1 for g in golds if g == 1)
    pred_sum = sum(1 for p in preds if p == 1)
    denom = 1.0 * true_sum + float(pred_sum)
    return (2.0 * tp) / denom if denom else 0.0


@register_aggregation("matthews_corrcoef")
def matthews_corrcoef(items: Sequence[Sequence[Any]]) -> float:
    """Multi-class Matthews correlation over ``(gold, pred)`` pairs, as scikit-learn computes it."""
    golds, preds = _pairs(items, "mcc")
    labels = sorted(set(golds) | set(preds), key=repr)
    n = float(len(golds))
    t_sum = [float(sum(1 for g in golds if g == k)) for k in labels]
    p_sum = [float(sum(1 for p in preds if p == k)) for k in labels]
    n_correct = float(sum(1 for g, p in zip(golds, preds) if g == p))
    cov_ytyp = n_correct * n - sum(t * p for t, p in zip(t_sum, p_sum))
    cov_ypyp = n**2 - sum(p * p for p in p_sum)
    cov_ytyt = n**2 - sum(t * t for t in t_sum)
    product = cov_ypyp * cov_ytyt
    return 0.0 if product == 0 else cov_ytyp / math.sqrt(product)


def _pairs(items: Sequence[Sequence[Any]], metric: str) -> tuple[list[Any], list[Any]]:
    golds, preds = [_label(x[0], metric) for x in items], [_label(x[1], metric) for x in items]
    return golds, preds


def _label(value: Any, metric: str) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, (int, str)):
        raise TaskError(
            f"metric '{metric}' needs one class label per document, got {value!r}; it is defined for "
            "multiple_choice tasks whose doc_to_target is a single choice (not a list of targets)"
        )
    return value


@register_aggregation("brier_score")
def brier_score(items: Sequence[Sequence[Any]]) -> float:
    gold, predictions = list(zip(*items))
    probs = np.array(predictions)
    _, num_class = probs.shape
    gold_one_hot = np.eye(num_class)[list(gold)]
    return float(np.mean(np.sum((probs - gold_one_hot) ** 2, axis=1)))


def _sacreformat(items: Sequence[Sequence[Any]]) -> tuple[list[Any], list[str]]:
    """``(reference, prediction)`` pairs to sacrebleu's (streams of references, predictions)."""
    refs, preds = (list(column) for column in zip(*items))
    if isinstance(refs[0], str) or not isinstance(refs[0], Sequence):
        refs = [[ref] for ref in refs]
    streams = list(zip(*refs))
    if not isinstance(preds[0], str) and isinstance(preds[0], Sequence):
        if len(preds[0]) != 1:
            raise TaskError(f"bleu/chrf/ter need one prediction per document, got {preds[0]!r}")
        preds = [pred[0] for pred in preds]
    return streams, preds


@register_aggregation("bleu")
def bleu(items: Sequence[Sequence[Any]]) -> float:
    import sacrebleu

    refs, preds = _sacreformat(items)
    return float(sacrebleu.corpus_bleu(preds, refs).score)


@register_aggregation("chrf")
def chrf(items: Sequence[Sequence[Any]]) -> float:
    import sacrebleu

    refs, preds = _sacreformat(items)
    return float(sacrebleu.corpus_chrf(preds, refs).score)


@register_aggregation("chrf++")
def chrfpp(items: Sequence[Sequence[Any]]) -> float:
    import sacrebleu

    refs, preds = _sacreformat(items)
    return float(sacrebleu.corpus_chrf(preds, refs, word_order=2).score)


@register_aggregation("ter")
def ter(items: Sequence[Sequence[Any]]) -> float:
    import sacrebleu

    refs, preds = _sacreformat(items)
    return float(sacrebleu.corpus_ter(preds, refs).score)


BOOTSTRAPPED: tuple[Callable[..., Any], ...] = (
    median,
    matthews_corrcoef,
    f1_score,
    perplexity,
    bleu,
    chrf,
    chrfpp,
    ter,
    nanmean,
)
"""The aggregations lm-eval bootstraps (by function identity: a user's own aggregation gets N/A)."""

bootstrap.BATCHED.update(
    {
        median: bootstrap.batch_median,
        perplexity: bootstrap.batch_perplexity,
        f1_score: bootstrap.batch_f1,
        matthews_corrcoef: bootstrap.batch_mcc,
    }
)

SLOW_METRICS = ("bleu", "chrf", "chrf++", "ter")
"""lm-eval caps the bootstrap of these metrics at 100 resamples, as each costs a corpus score."""


def stderr_fn(agg: Callable[..., Any], iters: int) -> Callable[[list[Any]], float] | None:
    """lm-eval's ``stderr_for_metric``: how to estimate the standard error of ``agg(items)``."""
    if iters <= 0:
        return None
    if agg in BOOTSTRAPPED:
        return lambda items: bootstrap_stderr(agg, items, iters)
    if agg is mean:
        return mean_stderr
    return None
