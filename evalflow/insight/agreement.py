"""Cohen's kappa between two per-document metrics, over the documents they both scored.

Two judges, or a judge and exact_match, agree on some documents by chance alone: kappa is the
agreement beyond chance, ``(p_o - p_e) / (1 - p_e)``, where ``p_o`` is the fraction of documents
given the same category and ``p_e = sum_c pA(c) * pB(c)`` the agreement of two independent raters
with the same category frequencies (Cohen 1960; unweighted, as scikit-learn's
``cohen_kappa_score``). The two metrics may come from one run (``compare RUN kappa=judge,exact_match``)
or from two runs paired document by document as :mod:`evalflow.insight.comparison` pairs them
(``compare RUN_A RUN_B kappa=exact_match``: the same metric in both runs)::

    >>> cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0]).kappa
    0.5

Values are categories: 0/1 scores, booleans, whole numbers (a judge's 1-5 grade, taken as nominal:
unweighted kappa gives no credit for a near miss), or strings (a judge's choice). A value with a
fraction (0.37) is refused rather than binned: where its bins lie is a choice the task should make
in its metric, not one this command can guess. Documents where either value is missing or NaN
(an unparseable judge output) are left out and counted. ``METRIC@FILTER`` picks the metric's
filter (:func:`split_filter`): a judge of the raw answer against exact_match of the extracted one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalflow.core.records import SAMPLE_FIELDS
from evalflow.errors import RunFolderError
from evalflow.output.run_folder import Run
from evalflow.output.run_paths import RESULTS

Category = int | str


@dataclass(frozen=True)
class Kappa:
    """Cohen's kappa of two raters' categories; ``kappa`` is None when undefined (see :func:`cohen_kappa`)."""

    kappa: float | None
    observed: float  # p_o: the fraction of documents both put in the same category
    expected: float  # p_e: the agreement expected by chance from each one's category frequencies
    categories: tuple[Category, ...]


def cohen_kappa(a: Sequence[Category], b: Sequence[Category]) -> Kappa:
    """Kappa of the paired categories ``a[i]``, ``b[i]``.

    When every document is in one and the same category for both, ``p_e = 1`` and kappa is 0/0:
    perfect agreement, but none beyond chance can be measured, so it is None (scikit-learn gives
    NaN), not 1. An empty pairing is an error, never a score.
    """
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: {len(a)} and {len(b)} values; the raters must score the same documents")
    if not a:
        raise RunFolderError("Cohen's kappa needs at least one document that both metrics scored; there is none")
    categories = tuple(sorted(set(a) | set(b), key=lambda c: (isinstance(c, str), c)))
    index = {c: i for i, c in enumerate(categories)}
    table = np.zeros((len(categories), len(categories)))
    np.add.at(table, ([index[x] for x in a], [index[y] for y in b]), 1)
    n = table.sum()
    observed = float(np.trace(table) / n)
    expected = float(table.sum(axis=1) @ table.sum(axis=0) / (n * n))
    if len(categories) == 1:
        return Kappa(None, observed, expected, categories)
    return Kappa((observed - expected) / (1.0 - expected), observed, expected, categories)


@dataclass(frozen=True)
class Agreement:
    """One row: metric A (of run A) against metric B (of run B, or the same run) on a task's filter."""

    task: str
    filter: str
    metric_a: str
    metric_b: str
    n: int  # documents paired
    kappa: float | None
    observed: float
    expected: float
    categories: tuple[Category, ...]
    left_out: int = 0  # documents where either value is missing or NaN (a judge's unparsed verdict)
    group: bool = False
    note: str = ""
    filter_b: str = ""  # metric B's filter: ``filter`` unless they differ (kappa=judge@raw,exact_match@strict)


def agreement(run_a: Run, run_b: Run, metric_a: str, metric_b: str, tasks: Sequence[str]) -> list[Agreement]:
    """Kappa per task and filter that report both metrics per document, then per group (pooled
    over its leaf tasks' documents, as compare pools them); an error when none does.

    ``METRIC@FILTER`` takes the metric under that filter only (:func:`split_filter`); a metric
    without one pairs, by default, with the other under each filter they share, or when they
    share none (a judge under its own pipeline, exact_match under another), under each pair of
    the filters they are reported under."""
    for run, metric in ((run_a, metric_a), (run_b, metric_b)):
        name, known = split_filter(metric)[0], _metrics(run, tasks)
        if name not in known:
            raise RunFolderError(
                f"compare kappa={metric_a},{metric_b}: {run.folder} has no per-document metric '{name}' in "
                f"{', '.join(tasks)}; its metrics are {', '.join(known) or 'none'}. Name two of them, as {RESULTS} "
                "spells them before the comma"
            )
    rows = [row for task in tasks for row in _rows(run_a, run_b, metric_a, metric_b, [task], task, False)]
    if not rows:
        raise RunFolderError(
            f"compare kappa={metric_a},{metric_b}: no task reports '{metric_a}' per document in {run_a.folder} "
            f"under a filter where {run_b.folder} reports '{metric_b}' (A's metrics: "
            f"{', '.join(_metrics(run_a, tasks)) or 'none'}; B's: {', '.join(_metrics(run_b, tasks)) or 'none'}; "
            f"filters: {', '.join(dict.fromkeys(f for t in tasks for f in run_a.filters(t))) or 'none'}); "
            f"name metrics of the samples files, as {RESULTS} spells them before the comma, and a filter "
            "after @ (kappa=judge_correct@none,exact_match@strict-match). A judge metric none of whose verdicts parsed "
            "has no per-document value to agree on"
        )
    groups_b = run_b.groups()
    for group, leaves in run_a.groups().items():
        if groups_b.get(group) == leaves and all(t in tasks for t in leaves):
            rows.extend(_rows(run_a, run_b, metric_a, metric_b, leaves, group, True))
    return rows


_FILTER = re.compile(r"^(?P<metric>.+)@(?P<filter>[^@]+)$")


def split_filter(name: str) -> tuple[str, str | None]:
    """``exact_match@strict-match`` -> (exact_match, strict-match); a trailing ``@4`` or ``@k`` is
    a reduction's label, part of the metric's name (``exact_match_pass@4``, ``..._pass@4@none``).

    >>> split_filter("judge@none"), split_filter("exact_match_pass@4"), split_filter("em_maj@8@flexible-extract")
    (('judge', 'none'), ('exact_match_pass@4', None), ('em_maj@8', 'flexible-extract'))
    """
    found = _FILTER.match(name)
    if found is None or found["filter"].isdigit() or found["filter"] == "k":
        return name, None
    return found["metric"], found["filter"]


def _filter_pairs(run_a: Run, run_b: Run, metric_a: str, metric_b: str, leaves: Sequence[str]) -> list[tuple[str, str]]:
    (name_a, given_a), (name_b, given_b) = split_filter(metric_a), split_filter(metric_b)
    reported_a = [f for f in _filters(run_a, leaves) if _values(run_a, leaves, name_a, f)]
    reported_b = [f for f in _filters(run_b, leaves) if _values(run_b, leaves, name_b, f)]
    if given_a or given_b:
        return [
            (fa, fb) for fa in ([given_a] if given_a else reported_a) for fb in ([given_b] if given_b else reported_b)
        ]
    shared = [(f, f) for f in reported_a if f in reported_b]
    return shared or [(fa, fb) for fa in reported_a for fb in reported_b]


def _rows(
    run_a: Run, run_b: Run, metric_a: str, metric_b: str, leaves: Sequence[str], name: str, group: bool
) -> list[Agreement]:
    out = []
    name_a, name_b = split_filter(metric_a)[0], split_filter(metric_b)[0]
    for fa, fb in _filter_pairs(run_a, run_b, metric_a, metric_b, leaves):
        va, vb = _values(run_a, leaves, name_a, fa), _values(run_b, leaves, name_b, fb)
        if not va or not vb or (group and not all(any(d[0] == t for d in va) for t in leaves)):
            continue  # a filter reporting one metric only (or a group some leaf of which lacks it)
        scored = _scored(run_a, leaves, fa) | _scored(run_b, leaves, fb) | set(va) | set(vb)
        pairs = [
            (_category(va.get(d), run_a, name_a, fa, d), _category(vb.get(d), run_b, name_b, fb, d))
            for d in sorted(scored)
        ]
        kept = [(x, y) for x, y in pairs if x is not None and y is not None]
        where = f"filter {fa}" if fa == fb else f"filters {fa} and {fb}"
        if not kept:
            raise RunFolderError(
                f"compare kappa={metric_a},{metric_b}: task '{name}' ({where}): every one of its {len(scored)} "
                "documents lacks a value of one of the metrics (missing or NaN: a judge verdict left out as "
                "unparsed), so there is nothing to agree on"
            )
        k = cohen_kappa([x for x, _ in kept], [y for _, y in kept])
        note = "" if k.kappa is not None else f"undefined: both metrics put every document in {k.categories[0]!r}"
        out.append(
            Agreement(
                name,
                fa,
                name_a,
                name_b,
                len(kept),
                k.kappa,
                k.observed,
                k.expected,
                k.categories,
                len(scored) - len(kept),
                group,
                note,
                fb,
            )
        )
    return out


def _scored(run: Run, leaves: Sequence[str], filt: str) -> set[tuple[str, int]]:
    return {(task, d) for task in leaves for d in run.doc_ids(task, filt)}


def _filters(run: Run, leaves: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(f for task in leaves for f in run.filters(task)))


def _values(run: Run, leaves: Sequence[str], metric: str, filt: str) -> dict[tuple[str, int], Any]:
    return {(task, d): v for task in leaves for d, v in run.per_doc(task, metric, filt).items()}


def _metrics(run: Run, tasks: Sequence[str]) -> list[str]:
    return sorted({k for task in tasks for row in run.rows(task) for k in row if k not in SAMPLE_FIELDS})


def _category(value: Any, run: Run, metric: str, filt: str, doc: tuple[str, int]) -> Category | None:
    """The value as a category: None for a missing one (None, NaN); a fraction or a list is refused."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return int(value)
    if isinstance(value, str):
        return value
    raise RunFolderError(
        f"compare kappa: metric '{metric}' of task '{doc[0]}' (filter {filt}) in {run.folder} has the value "
        f"{value!r} on document {doc[1]}, which is not a category. Cohen's kappa counts agreement between "
        "categories: 0/1 scores (exact_match, acc), booleans, whole-number grades or a judge's choice. For a "
        "continuous score, compare the runs without kappa= (a paired bootstrap of the difference), or make "
        "the task's metric return the bins you mean (a threshold on the score)"
    )


def as_table_rows(rows: Sequence[Agreement]) -> list[list[str]]:
    return [
        [
            f"{r.task} (group)" if r.group else r.task,
            r.filter if r.filter_b in ("", r.filter) else f"{r.filter} / {r.filter_b}",
            r.metric_a,
            r.metric_b,
            str(r.n),
            f"{r.observed:.4f}",
            f"{r.expected:.4f}",
            "" if r.kappa is None else f"{r.kappa:+.4f}",
            "; ".join(
                x for x in (r.note, f"{r.left_out} documents without both values (left out)" if r.left_out else "") if x
            ),
        ]
        for r in rows
    ]


COLUMNS = ("Task", "Filter", "Metric A", "Metric B", "Docs", "Agreement", "By chance", "Kappa", "Note")


def as_json(rows: Sequence[Agreement]) -> list[Mapping[str, Any]]:
    return [{**r.__dict__, "categories": list(r.categories)} for r in rows]
