"""lm-eval's seeded bootstrap standard error, bit for bit, without its process pool.

lm-eval draws ``iters // chunk`` chunks (``chunk = min(1000, iters)``); chunk ``i`` uses
``random.Random(i)`` and draws ``chunk`` resamples with ``rnd.choices(xs, k=len(xs))``; the
stderr is the sample standard deviation of the statistic over all resamples. ``choices`` picks index
``floor(random() * n)`` and ``random()`` is MT19937's 53-bit double, so loading ``Random(i)``'s
state into numpy's ``RandomState`` yields the very same indices, drawn in bulk instead of one by
one. The statistic is then computed per resample: in bulk for median, perplexity, F1 and MCC (with
the same float operations, so the same bits), else by calling the aggregation on each resample.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any

from evalflow.errors import ConfigError
from evalflow.scoring import lazy_numpy as np

Batch = Callable[["np.ndarray"], list[float]]
"""Computes the statistic for each row of an index matrix (rows = resamples)."""

BATCHED: dict[Callable[..., Any], Callable[[list[Any]], Batch | None]] = {}
"""aggregation -> a preparer returning a bulk form for these items, or None to compute one by one."""

_MAX_CELLS = 2_000_000  # resample indices held at once (16 MB); bounds memory on large tasks


def mean(arr: Sequence[Any]) -> Any:
    """``sum(arr) / len(arr)``: Python's left-to-right sum, as lm-eval (not numpy's pairwise sum)."""
    return sum(arr) / len(arr)


def sample_stddev(arr: Sequence[Any]) -> float:
    mu = mean(arr)
    return math.sqrt(sum([(x - mu) ** 2 for x in arr]) / (len(arr) - 1))


def bootstrap_stderr(f: Callable[[list[Any]], Any], xs: Sequence[Any], iters: int) -> float:
    """The bootstrap standard error of ``f(xs)`` that lm-eval reports for ``iters`` resamples."""
    items = list(xs)
    n = len(items)
    chunk = min(1000, iters)
    if iters < 2:
        raise ConfigError(
            f"bootstrap_iters={iters} draws one resample, whose spread is undefined (lm-eval divides "
            "by zero here); use at least 2, or 0 to skip bootstrapped standard errors"
        )
    preparer = BATCHED.get(f)
    batch = preparer(items) if preparer is not None else None
    results: list[float] = []
    for seed in range(iters // chunk):
        stream = _python_stream(seed)
        done = 0
        while done < chunk:
            rows = min(chunk - done, max(1, _MAX_CELLS // max(n, 1)))
            idx = np.floor(stream.random_sample(rows * n) * float(n)).astype(np.intp).reshape(rows, n)
            if batch is not None:
                results.extend(batch(idx))
            else:
                results.extend(f([items[j] for j in row]) for row in idx.tolist())
            done += rows
    return sample_stddev(results)


def _python_stream(seed: int) -> np.random.RandomState:
    """A numpy generator in exactly the state of ``random.Random(seed)``."""
    state = random.Random(seed).getstate()[1]
    stream = np.random.RandomState()
    stream.set_state(("MT19937", np.array(state[:624], dtype=np.uint32), int(state[624]), 0, 0.0))
    return stream


def _floats(items: list[Any]) -> np.ndarray | None:
    if not items or not all(type(x) is float for x in items):
        return None
    return np.array(items, dtype=np.float64)


def batch_median(items: list[Any]) -> Batch | None:
    values = _floats(items)
    if values is None or np.isnan(values).any():  # NaN breaks sorted()'s order; go one by one
        return None
    half = len(items) // 2

    def run(idx: np.ndarray) -> list[float]:
        medians: list[float] = np.sort(values[idx], axis=1)[:, half].tolist()
        return medians

    return run


def batch_perplexity(items: list[Any]) -> Batch | None:
    values = _floats(items)
    if values is None:
        return None
    n = len(items)
    # cumsum adds left to right like Python's sum(); its last column is each resample's sum.
    return lambda idx: [math.exp(-(s / n)) for s in np.cumsum(values[idx], axis=1)[:, -1].tolist()]


def _int_pairs(items: list[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    ok = all(isinstance(g, (int, np.integer)) and isinstance(p, (int, np.integer)) for g, p in items)
    if not items or not ok:
        return None
    golds, preds = zip(*items)
    return np.array(golds, dtype=np.int64), np.array(preds, dtype=np.int64)


def batch_f1(items: list[Any]) -> Batch | None:
    pairs = _int_pairs(items)
    if pairs is None:
        return None
    gold_pos, pred_pos = pairs[0] == 1, pairs[1] == 1

    def run(idx: np.ndarray) -> list[float]:
        g, p = gold_pos[idx], pred_pos[idx]
        tp = (g & p).sum(axis=1).astype(np.float64)
        denom = 1.0 * g.sum(axis=1).astype(np.float64) + p.sum(axis=1).astype(np.float64)
        safe = np.where(denom == 0, 1.0, denom)
        scores: list[float] = np.where(denom == 0, 0.0, (2.0 * tp) / safe).tolist()
        return scores

    return run


def batch_mcc(items: list[Any]) -> Batch | None:
    pairs = _int_pairs(items)
    if pairs is None:
        return None
    golds, preds = pairs
    labels = np.union1d(golds, preds)

    def run(idx: np.ndarray) -> list[float]:
        g, p = golds[idx], preds[idx]
        n = float(idx.shape[1])
        t_sum = np.stack([(g == k).sum(axis=1) for k in labels], axis=1).astype(np.float64)
        p_sum = np.stack([(p == k).sum(axis=1) for k in labels], axis=1).astype(np.float64)
        n_correct = (g == p).sum(axis=1).astype(np.float64)
        # Every term is an integer below 2**53, so these float sums are exact in any order.
        cov_ytyp = n_correct * n - (t_sum * p_sum).sum(axis=1)
        cov_ypyp = n**2 - (p_sum * p_sum).sum(axis=1)
        cov_ytyt = n**2 - (t_sum * t_sum).sum(axis=1)
        product = cov_ypyp * cov_ytyt
        safe = np.where(product == 0, 1.0, product)
        scores: list[float] = np.where(product == 0, 0.0, cov_ytyp / np.sqrt(safe)).tolist()
        return scores

    return run
