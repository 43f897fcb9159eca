"""``stop_at_stderr=S``: a plain run that stops evaluating each task once its number is known to the
precision asked for.

Each task's selected documents (``limit``/``samples`` applied) are put in a seeded random order;
the run evaluates them in rounds (:func:`evalflow.insight.sequential.round_sizes`), each round a
normal run of every still-open task's prefix through the run path (``subset=``: the prompts of the
whole run, so nothing is wasted and a later whole run reuses every answer). After each round a
task's first 0/1 metric (first filter) gets its anytime-valid 95% interval for the mean over the
WHOLE task (:func:`evalflow.insight.sequential.mean_interval`, sampling without replacement, value
range (0, 1)); the task stops once the interval's half-width is at most ``1.96 * S``. Because the
interval is valid at every prefix at once, stopping on it keeps its 95% coverage (a fixed-n
standard error peeked at after each round would not). What this returns is the ``subset=`` the
final run evaluates: its answers are all cached by then.
"""

from __future__ import annotations

import dataclasses
import logging
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evalflow.config.schema import RunSettings
from evalflow.core.records import Scores
from evalflow.errors import ConfigError

log = logging.getLogger(__name__)
Z95 = 1.96  # the normal quantile that turns a standard error into a 95% half-width
LEVEL = 0.05


def task_order(task: str, doc_ids: Sequence[int], seed: int) -> list[int]:
    """The task's documents in a random order seeded by the run's seed and the task's name."""
    import numpy as np

    rng = np.random.default_rng([seed, zlib.crc32(task.encode())])
    return [int(doc_ids[i]) for i in rng.permutation(len(doc_ids))]


def half_width(scores: Scores, order: Sequence[int], seen: int, task: str) -> float:
    """Half the width of the anytime-valid 95% interval of the task's first 0/1 metric after the
    first ``seen`` documents of ``order``."""
    if not scores.by_filter:
        raise ConfigError(f"stop_at_stderr: task '{task}' has no per-document metric values to stop on")
    values = dict(zip(scores.doc_ids, next(iter(scores.by_filter.values()))))
    metric = next((m for m, v in values[order[0]].items() if isinstance(v, (bool, int, float))), None)
    observed = [values[d].get(metric) for d in order[:seen]] if metric is not None else []
    if metric is None or not all(v in (0, 1) for v in observed):
        raise ConfigError(
            f"stop_at_stderr: task '{task}''s first metric ({metric}) is not 0/1 on every document; an "
            "anytime-valid interval needs a bounded value, and stop_at_stderr gates 0/1 metrics only "
            "(acc, exact_match); run the task whole"
        )
    from evalflow.insight import sequential  # numpy: imported by a run that stops early, not by every run

    interval = sequential.mean_interval([float(v or 0) for v in observed], [1] * len(order), (0.0, 1.0), LEVEL)
    return (interval.high - interval.low) / 2.0


def precision_subset(
    settings: RunSettings,
    selected: Mapping[str, Sequence[int]],
    evaluate_round: Callable[[RunSettings], Mapping[str, Mapping[str, Any]]],
) -> RunSettings:
    """The rounds: ``selected`` is each task's selected documents; ``evaluate_round`` runs the
    settings it is given through the run path and returns each task's stage outputs. Returns the
    settings of the final run: ``subset=`` each task's documents seen when it stopped."""
    from evalflow.insight import sequential

    target = Z95 * float(settings.stop_at_stderr or 0.0)
    orders = {task: task_order(task, ids, settings.seed) for task, ids in selected.items()}
    sizes = {task: sequential.round_sizes(len(order)) for task, order in orders.items() if order}
    seen = dict.fromkeys(sizes, 0)
    open_tasks = set(sizes)
    for step in range(max((len(s) for s in sizes.values()), default=0)):
        for task in open_tasks:
            seen[task] = sizes[task][min(step, len(sizes[task]) - 1)]
        chosen = {task: tuple(sorted(orders[task][: seen[task]])) for task in seen}
        outputs = evaluate_round(dataclasses.replace(settings, subset=chosen, stop_at_stderr=None))
        for task in sorted(open_tasks):
            width = half_width(outputs[task]["metrics"], orders[task], seen[task], task)
            log.info(
                "stop_at_stderr: %s %d of %d documents, interval half-width %.4f",
                task,
                seen[task],
                len(orders[task]),
                width,
            )
            if width <= target or seen[task] == len(orders[task]):
                open_tasks.discard(task)
        if not open_tasks:
            break
    return dataclasses.replace(settings, subset={task: tuple(sorted(orders[task][: seen[task]])) for task in seen})
