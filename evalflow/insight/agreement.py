"""Cohen's kappa between two per-document metrics, over the documents they both scored.

Two judges, or a judge and exact_match, agree on some documents by chance alone: kappa is the
agreement beyond chance, ``(p_o - p_e) / (1 - p_e)``, where ``p_o`` is the fraction of documents
given the same category and ``p_e = sum_c pA(c) * pB(c)`` the agreement of two independent raters
with the same category frequencies (Cohen 1960; unweighted, as scikit-learn's
``cohen_kappa_score``). The two metrics may come from one run (``compare RUN kappa=judge,exact_match``)
or from two runs paired document by document as :mod:`evalflow.insight.compare` pairs them
(``compare RUN_A RUN_B kappa=exact_match``: the same metric in both runs)::

    >>> cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0]).kappa
    0.5

Values are categories: 0/1 scores, booleans, whole numbers (a judge's 1-5 grade, taken as nominal:
unweighted kappa gives no credit for a near miss), or strings (a judge's choice). A value with a
fraction (0.37) is refused rather than binned: where its bins lie is a choice the task should make
in its metric, not one this command can guess. Documents where either value is missing or NaN
(an unparseable judge output) are left out and counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from evalflow.errors import RunFolderError
from evalflow.insight.runs import Run

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
    left_out: int = 0  # documents where either value is missing or NaN
    group: bool = False
    note: str = ""


def agreement(run_a: Run, run_b: Run, metric_a: str, metric_b: str, tasks: Sequence[str]) -> list[Agreement]:
    """Kappa per task and filter that report both metrics per document, then per group (pooled
    over its leaf tasks' documents, as compare pools them); an error when none does."""
    rows = [row for task in tasks for row in _rows(run_a, run_b, metric_a, metric_b, [task], task, False)]
    if not rows:
        raise RunFolderError(
            f"compare kappa={metric_a},{metric_b}: no task reports '{metric_a}' per document in {run_a.folder} "
            f"under a filter where {run_b.folder} reports '{metric_b}' (A's metrics: "
            f"{', '.join(_metrics(run_a, tasks)) or 'none'}; B's: {', '.join(_metrics(run_b, tasks)) or 'none'}); "
            "name metrics of the samples files, as results.json spells them before the comma"
        )
    groups_b = run_b.groups()
    for group, leaves in run_a.groups().items():
        if groups_b.get(group) == leaves and all(t in tasks for t in leaves):
            rows.extend(_rows(run_a, run_b, metric_a, metric_b, leaves, group, True))
    return rows


def _rows(run_a: Run, run_b: Run, metric_a: str, metric_b: str, leaves: Sequence[str], name: str,
          group: bool) -> list[Agreement]:
    out = []
    filters = [f for f in _filters(run_a, leaves) if f in _filters(run_b, leaves)]
    for filt in filters:
        va, vb = _values(run_a, leaves, metric_a, filt), _values(run_b, leaves, metric_b, filt)
        docs = sorted(set(va) & set(vb))
        if not docs or (group and not all(any(d[0] == t for d in docs) for t in leaves)):
            continue  # a filter reporting one metric only (or a group some leaf of which lacks it)
        pairs = [(_category(va[d], run_a, metric_a, filt, d), _category(vb[d], run_b, metric_b, filt, d)) for d in docs]
        kept = [(x, y) for x, y in pairs if x is not None and y is not None]
        if not kept:
            raise RunFolderError(
                f"compare kappa={metric_a},{metric_b}: task '{name}' (filter {filt}): every one of its {len(docs)} "
                "documents lacks a value of one of the metrics (missing or NaN), so there is nothing to agree on"
            )
        k = cohen_kappa([x for x, _ in kept], [y for _, y in kept])
        note = "" if k.kappa is not None else f"undefined: both metrics put every document in {k.categories[0]!r}"
        out.append(Agreement(name, filt, metric_a, metric_b, len(kept), k.kappa, k.observed, k.expected,
                             k.categories, len(docs) - len(kept), group, note))
    return out


def _filters(run: Run, leaves: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(f for task in leaves for f in run.filters(task)))


def _values(run: Run, leaves: Sequence[str], metric: str, filt: str) -> dict[tuple[str, int], Any]:
    return {(task, d): v for task in leaves for d, v in run.per_doc(task, metric, filt).items()}


def _metrics(run: Run, tasks: Sequence[str]) -> list[str]:
    skip = {"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics", "doc_hash",
            "prompt_hash", "target_hash", "filtered_samples", "sample_metrics"}
    return sorted({k for task in tasks for row in run.rows(task) for k in row if k not in skip})


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
    return [[
        f"{r.task} (group)" if r.group else r.task, r.filter, r.metric_a, r.metric_b, str(r.n),
        f"{r.observed:.4f}", f"{r.expected:.4f}", "" if r.kappa is None else f"{r.kappa:+.4f}",
        "; ".join(x for x in (r.note, f"{r.left_out} documents without both values" if r.left_out else "") if x),
    ] for r in rows]


COLUMNS = ("Task", "Filter", "Metric A", "Metric B", "Docs", "Agreement", "By chance", "Kappa", "Note")


def as_json(rows: Sequence[Agreement]) -> list[Mapping[str, Any]]:
    return [{**r.__dict__, "categories": list(r.categories)} for r in rows]
