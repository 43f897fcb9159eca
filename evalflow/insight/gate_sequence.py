"""The sequential release gate's decisions (``python -m evalflow gate``), pure: which rows it gates,
the seeded order in which the candidate sees the baseline's documents, and each round's intervals
and verdicts. The statistics (the anytime-valid interval, the error split) are
:mod:`evalflow.insight.sequential`'s; the rounds themselves are normal runs (the command's).

One seeded random order of every *unit* of every task (a unit is a document, or a cluster of
documents when the task has cluster ids) serves all rows: a row's units, in the order they appear
in it, are a uniformly random order of that row's own population (a random permutation restricted
to a subset is a random permutation of the subset), so one task's prefix, and a group's pooled
prefix over its members, are each what :func:`evalflow.insight.sequential.mean_interval` assumes.

    >>> order = unit_order({"t": {0: None, 1: None, 2: None}}, seed=1)
    >>> sorted(u.docs for u in order)
    [(0,), (1,), (2,)]
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalflow.errors import ConfigError, closest
from evalflow.insight import sequential
from evalflow.insight.comparison import is_mean, pooled_values
from evalflow.insight.gate import EVERY_ROW, RowChoice
from evalflow.output.run_folder import Run, metric_keys
from evalflow.output.run_paths import gate_record_file

Doc = tuple[str, int]  # (leaf task, doc_id)
BINARY = (0.0, 1.0)


@dataclass(frozen=True)
class Unit:
    """What the order samples: one document, or every document of one cluster of one task."""

    task: str
    docs: tuple[int, ...]


@dataclass(frozen=True)
class GatedRow:
    """One gated row: a task's (or group's) metric under one filter, in its direction."""

    name: str  # "task metric,filter" as today's gate names it
    leaves: tuple[str, ...]
    metric: str
    filter: str
    higher_is_better: bool
    value_range: tuple[float, float]  # one document's value: (0, 1) for 0/1 metrics, else declared
    baseline: Mapping[Doc, float]  # the baseline's per-document values (the full run's)

    @property
    def difference_range(self) -> tuple[float, float]:
        """The range of one document's paired difference, oriented so that higher is better."""
        lo, hi = self.value_range
        return (lo - hi, hi - lo)


@dataclass(frozen=True)
class RowState:
    """A row after a round: how many of its documents were seen, its interval and verdict."""

    name: str
    seen: int
    documents: int
    low: float
    high: float
    verdict: str | None  # "fail", "pass", or None (undecided)


def unit_order(clusters: Mapping[str, Mapping[int, Any]], seed: int) -> tuple[Unit, ...]:
    """Every unit of every task, in one seeded random order. ``clusters``: per task, each document's
    cluster id (None: the document is its own unit), e.g. ``Run.clusters(task)`` where it exists."""
    import numpy as np

    units: list[Unit] = []
    for task in sorted(clusters):
        grouped: dict[Any, list[int]] = {}
        for doc, cluster in sorted(clusters[task].items()):
            grouped.setdefault(("doc", doc) if cluster is None else ("cluster", str(cluster)), []).append(doc)
        units.extend(Unit(task, tuple(docs)) for _, docs in sorted(grouped.items(), key=lambda kv: kv[1][0]))
    permutation = np.random.default_rng(seed).permutation(len(units))
    return tuple(units[i] for i in permutation)


def round_prefixes(order: Sequence[Unit], first: int, budget: int | None) -> tuple[int, ...]:
    """The number of units seen after each round (``sequential.round_sizes``), cut where the next
    round would evaluate more than ``budget`` documents (:func:`subset`'s, the look-ahead units
    counted): the last round then holds as many units as fit."""
    sizes = sequential.round_sizes(len(order), first=first)
    if budget is None:
        return tuple(sizes)
    evaluated = _evaluated_counts(order)
    fits = max(k for k in range(len(order) + 1) if evaluated[k] <= budget)
    if fits == 0:
        raise ConfigError(
            f"gate: budget={budget} documents is smaller than the first round can evaluate ({evaluated[1]} "
            "documents: the first unit, and one unit of every other task); give a larger budget"
        )
    return tuple(dict.fromkeys(min(size, fits) for size in sizes if min(size, fits) > 0))


def _evaluated_counts(order: Sequence[Unit]) -> list[int]:
    """For each prefix length k (0..len(order)), how many documents :func:`subset` evaluates:
    the prefix's, and the first unit of every task the prefix does not reach (never fewer as k
    grows: a task's first unit moves from the look-ahead into the prefix)."""
    first: dict[str, int] = {}
    for k, unit in enumerate(order):
        first.setdefault(unit.task, k)
    prefix, ahead = 0, sum(len(order[k].docs) for k in first.values())
    counts = [0]
    for k, unit in enumerate(order):
        prefix += len(unit.docs)
        if first[unit.task] == k:
            ahead -= len(unit.docs)
        counts.append(prefix + ahead)
    return counts


def subset(order: Sequence[Unit], seen: int) -> dict[str, list[int]]:
    """The run setting ``subset=`` of a round: each task's documents among the first ``seen``
    units, and for a task none of whose units is among them yet, its first unit in the order. A
    run evaluates a task that ``subset=`` leaves out whole, so every task needs documents; the
    round judges the prefix only, and that unit is the task's next to be judged: computed early,
    not wasted (a suite of 57 mmlu subjects has most of them unseen after a first round of 64)."""
    out: dict[str, list[int]] = {}
    for unit in order[:seen]:
        out.setdefault(unit.task, []).extend(unit.docs)
    for unit in order[seen:]:
        if unit.task not in out:
            out[unit.task] = list(unit.docs)
    return {task: sorted(docs) for task, docs in sorted(out.items())}


def gated_rows(
    baseline: Run, ranges: Mapping[str, tuple[float, float]], choice: RowChoice = EVERY_ROW
) -> list[GatedRow]:
    """The rows the gate judges: every task's and group's metric with a direction and per-document
    values whose mean is the reported number, of those ``choice`` (``rows=``) takes. A metric
    whose values are not all 0/1 needs a range (``ranges=``): refused here, before any model call,
    when it has none."""
    candidates = []
    names = [(task, [task]) for task in baseline.tasks()]
    names += [(group, leaves) for group, leaves in baseline.groups().items()]
    for name, leaves in names:
        entry = baseline.results["results"].get(name, {})
        for metric, filt in metric_keys(entry):
            direction = baseline.results.get("higher_is_better", {}).get(name, {}).get(metric)
            values = pooled_values(baseline, leaves, metric, filt)
            if not isinstance(direction, bool) or values is None or not is_mean(values, entry[f"{metric},{filt}"]):
                continue  # not a mean of per-document values, or no direction: decided at the full run
            candidates.append((name, leaves, metric, filt, direction, values))
    choice.check([(c[0], c[2], c[3]) for c in candidates], "gate")
    _check_range_names(ranges, {c[2] for c in candidates})
    rows = []
    for name, leaves, metric, filt, direction, values in candidates:
        if choice.takes(name, metric, filt):
            label = f"{name}{' (group)' if name not in baseline.tasks() else ''} {metric},{filt}"
            rows.append(
                GatedRow(label, tuple(leaves), metric, filt, direction, _range(label, metric, values, ranges), values)
            )
    return rows


def _check_range_names(ranges: Mapping[str, tuple[float, float]], metrics: set[str]) -> None:
    """Each ``ranges=`` name is a metric the gate can judge (a typo would leave the metric it
    meant undeclared, or silently declare nothing)."""
    for name in ranges:
        if name not in metrics:
            raise ConfigError(f"gate: ranges={name}:... names no metric the gate can judge; {closest(name, metrics)}")


def _range(
    label: str, metric: str, values: Mapping[Doc, float], ranges: Mapping[str, tuple[float, float]]
) -> tuple[float, float]:
    """One document's range: ``ranges=``'s, else (0, 1) for a metric whose baseline values are all
    0 or 1, else the range its registration declares (``register_metric(value_range=)``)."""
    from evalflow.scoring.registry import declared_range

    if metric not in ranges and all(v in BINARY for v in values.values()):
        return BINARY
    declared, where = (ranges[metric], "ranges=") if metric in ranges else (declared_range(metric), "its registration")
    seen = f"{math.floor(min(values.values())):g}:{math.ceil(max(values.values())):g}"
    if declared is None:
        raise ConfigError(
            f"gate: {label} is not a 0/1 metric (the baseline's documents score from {min(values.values())!r} to "
            f"{max(values.values())!r}), and an anytime-valid interval needs the range one document's value can "
            f"take; declare it with ranges={metric}:LOW:HIGH (at least ranges={metric}:{seen}; the metric's true "
            "bounds, not the values seen) or register_metric(..., value_range=(LOW, HIGH)), or leave the metric out "
            "of the gate with rows=; refused before any model call"
        )
    lo, hi = declared
    outside = [d for d, v in values.items() if not lo <= v <= hi]
    if outside:
        task, doc = outside[0]
        raise ConfigError(
            f"gate: {where} declares {metric} in [{lo:g}, {hi:g}], but the baseline's document {doc} of "
            f"task '{task}' scored {values[outside[0]]!r}; declare the metric's true range "
            f"(ranges={metric}:LOW:HIGH, which overrides a registration; at least {seen})"
        )
    return (lo, hi)


def judge_round(
    rows: Sequence[GatedRow],
    order: Sequence[Unit],
    seen: int,
    candidate: Run,
    alpha: float,
    max_drop: float,
) -> list[RowState]:
    """Each row's interval and verdict after the first ``seen`` units of ``order`` were evaluated by
    the candidate (``candidate``: that round's run folder). The error budget is split over the rows
    by :func:`sequential.row_alpha`. A document the candidate left without a value counts as its
    worst value, so a missing value can only push a row towards failing."""
    level = sequential.row_alpha(alpha, len(rows))
    states = []
    for row in rows:
        values = pooled_values(candidate, row.leaves, row.metric, row.filter) or {}
        units = _row_units(row, order)
        sums = [sum(_difference(row, values, (task, d)) for d in docs) for task, docs in _row_units(row, order[:seen])]
        sizes = [len(docs) for _, docs in units]
        if not sums:  # none of the row's units in the prefix yet (a small task of a suite): nothing known
            states.append(RowState(row.name, 0, sum(sizes), *row.difference_range, None))
            continue
        interval = sequential.mean_interval(sums, sizes, row.difference_range, level)
        verdict = sequential.gate_verdict(interval, max_drop)
        seen_docs = sum(sizes[: len(sums)])
        states.append(RowState(row.name, seen_docs, sum(sizes), interval.low, interval.high, verdict))
    return states


def _row_units(row: GatedRow, order: Sequence[Unit]) -> list[tuple[str, list[int]]]:
    """The row's units in order, each holding the documents the baseline gave a value (the row's
    population: a document the baseline left without one is not paired, as in ``compare``)."""
    units = [(u.task, [d for d in u.docs if (u.task, d) in row.baseline]) for u in order if u.task in row.leaves]
    return [(task, docs) for task, docs in units if docs]


def _difference(row: GatedRow, candidate: Mapping[Doc, float], doc: Doc) -> float:
    """The document's paired difference, oriented so that higher is better."""
    lo, hi = row.value_range
    worst = lo if row.higher_is_better else hi
    b = candidate.get(doc, worst)
    b = worst if math.isnan(b) else b
    diff = b - row.baseline[doc]  # the row's units hold only documents with a baseline value
    return diff if row.higher_is_better else -diff


def decided(states: Sequence[RowState]) -> str | None:
    """The gate's verdict so far: "fail" once any row fails (one regression fails the build), "pass"
    once every row passes, None while some row is undecided."""
    if any(s.verdict == "fail" for s in states):
        return "fail"
    if states and all(s.verdict == "pass" for s in states):
        return "pass"
    return None


def documents_used(counts: Mapping[str, Sequence[int]], most: int = 6) -> str:
    """Each task's documents ``n of N``, or past ``most`` tasks (mmlu's 57) their sums: a line a
    reader can take in every round (gate.json keeps each task's).

    >>> documents_used({"a": [16, 400], "b": [1, 10]})
    'a 16 of 400, b 1 of 10'
    >>> documents_used({"a": [16, 400], "b": [1, 10]}, most=1)
    '2 tasks: 17 of 410 documents'
    """
    if len(counts) <= most:
        return ", ".join(f"{t} {n} of {total}" for t, (n, total) in counts.items())
    return (
        f"{len(counts)} tasks: {sum(n for n, _ in counts.values())} of {sum(t for _, t in counts.values())} documents"
    )


def gate_lines(folder: Path) -> list[str]:
    """What ``explain`` and the report say of a sequential gate's run folder: each round's documents
    and intervals, and the verdict (its ``gate.json``); none for another folder."""
    path = gate_record_file(folder)
    if not path.is_file():
        return []
    record = json.loads(path.read_text(encoding="utf-8"))
    lines = [
        f"gate against {record['baseline']} (max_drop={record['max_drop']:g}, alpha={record['alpha']:g}, "
        f"order_seed={record['order_seed']}): {record['verdict']}, decided by the {record['decided_by']}"
    ]
    for k, round_ in enumerate(record["rounds"], start=1):
        used = documents_used(round_["documents"])
        rows = "; ".join(
            f"{r['name']} [{r['low']:+.4f}, {r['high']:+.4f}] {r['verdict'] or 'undecided'}" for r in round_["rows"]
        )
        lines.append(f"gate round {k}: {used}: {rows or 'no row gated before the full run'}")
    return lines
