"""Two runs compared per task, group and metric: A, B, B - A, and a paired test over the documents
both runs scored (``python -m evalflow compare``).

0/1 metrics (acc, exact_match) get the exact McNemar test, others a seeded paired bootstrap; every
row gets the bootstrap's 95% interval of the difference (:mod:`evalflow.insight.stats`). Groups are
paired over all documents of their leaf tasks. Runs are paired only when they scored the same
documents of the same data; either may be an evalflow run folder or an lm-eval output folder.
Documents with a value in one run only are left out of the pairing and counted (``left_out``).
:func:`verdicts` judges each row for the release gate (:mod:`evalflow.insight.gate`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalflow.errors import RunFolderError
from evalflow.insight.gate import GateSettings, Verdict, bootstrap_detectable, judge, mcnemar_detectable
from evalflow.insight.stats import (
    cluster_bootstrap,
    clustered_mcnemar,
    discordant,
    is_binary,
    mcnemar_exact,
    paired_bootstrap,
)
from evalflow.output.partial import PARTIAL, partial_tasks
from evalflow.output.run_folder import Run, metric_keys
from evalflow.output.run_paths import MANIFEST, RESULTS

DEFAULT_ITERS = 10000
Doc = tuple[str, int]  # (leaf task, doc_id)


@dataclass(frozen=True)
class Comparison:
    """One row: a task's (or group's) metric under one filter, in A and B."""

    task: str
    metric: str
    filter: str
    a: float | None  # None: reported without a value (a judge metric none of whose verdicts parsed)
    b: float | None
    n: int  # documents paired: those with a value in both runs
    diff: float | None
    low: float | None = None
    high: float | None = None
    p_value: float | None = None
    test: str | None = None  # "mcnemar", "bootstrap", or None with a note
    note: str = ""
    group: bool = False
    higher_is_better: bool | None = None  # from A's results.json (B's where A's does not say)
    detectable: float | None = None  # the smallest |B - A| the paired documents can show at alpha
    left_out: int = 0  # documents scored in both runs without a value in both (the note says why)
    clusters: int | None = None  # the test resampled these clusters (cluster_key), not documents


def compare(
    run_a: Run, run_b: Run, iters: int = DEFAULT_ITERS, seed: int = 1234, alpha: float = 0.05
) -> list[Comparison]:
    tasks = [t for t in run_a.tasks() if t in run_b.tasks()]
    if not tasks:
        raise RunFolderError(
            f"{run_a.folder} and {run_b.folder} have no task in common (A: {', '.join(run_a.tasks()) or 'none'}; "
            f"B: {', '.join(run_b.tasks()) or 'none'}); compare runs of the same tasks"
        )
    for task in tasks:
        check_paired(run_a, run_b, task)
    rows: list[Comparison] = []
    for task in tasks:
        rows.extend(_rows(run_a, run_b, [task], task, iters, seed, alpha, group=False))
    groups_a, groups_b = run_a.groups(), run_b.groups()
    for group, leaves in groups_a.items():
        if groups_b.get(group) == leaves and all(t in tasks for t in leaves):
            rows.extend(_rows(run_a, run_b, leaves, group, iters, seed, alpha, group=True))
    return rows


def check_paired(run_a: Run, run_b: Run, task: str) -> int:
    """The number of documents of ``task`` both runs scored; refuses runs that scored different ones."""
    fa, fb = run_a.data_fingerprint(task), run_b.data_fingerprint(task)
    if fa and fb and fa != fb:
        raise RunFolderError(
            f"task '{task}': {run_a.folder} and {run_b.folder} read different data (data fingerprints "
            f"{fa[:8]} and {fb[:8]} in their {MANIFEST}); a paired test needs the same documents"
        )
    images = run_a.hashes_images and run_b.hashes_images  # a document is its row and its images' pixels
    docs_a, docs_b = run_a.doc_fingerprints(task, images), run_b.doc_fingerprints(task, images)
    partial = [(r, partial_tasks(r.results)[task]) for r in (run_a, run_b) if task in partial_tasks(r.results)]
    if partial:
        run, (n, total) = partial[0]
        raise RunFolderError(
            f"task '{task}': {run.folder} is a partial run ({n} of {total} documents, {RESULTS}'s "
            f"'{PARTIAL}': a gate's, or one stopped by stop_at_stderr), not a complete one; compare whole runs "
            "(a later whole run of the same settings computes only the documents the partial run did not evaluate)"
        )
    if set(docs_a) != set(docs_b):
        common = len(set(docs_a) & set(docs_b))
        raise RunFolderError(
            f"task '{task}': the runs scored different documents (A {run_a.folder}: {len(docs_a)}, "
            f"B {run_b.folder}: {len(docs_b)}, {common} in common); re-run one with the other's limit "
            "so both score the same documents"
        )
    differing = sorted(d for d in docs_a if docs_a[d] != docs_b[d])
    if differing:
        rows_a, rows_b = run_a.doc_fingerprints(task, False), run_b.doc_fingerprints(task, False)
        what = "in its row" if rows_a[differing[0]] != rows_b[differing[0]] else "in its images' pixels"
        raise RunFolderError(
            f"task '{task}': document {differing[0]} (and {len(differing) - 1} more) differs {what} "
            f"between {run_a.folder} and {run_b.folder}: the runs read different data; a paired test needs "
            "the same documents"
        )
    return len(docs_a)


def _rows(
    run_a: Run, run_b: Run, leaves: Sequence[str], name: str, iters: int, seed: int, alpha: float, group: bool
) -> list[Comparison]:
    entry_a = run_a.results["results"].get(name, {})
    entry_b = run_b.results["results"].get(name, {})
    out = []
    clusters = _clusters(run_a, run_b, leaves)
    for metric, filt in metric_keys(entry_a, with_null=True):
        key = f"{metric},{filt}"
        if key not in entry_b or not (entry_b[key] is None or _number(entry_b[key])):
            continue
        a, b = entry_a[key], entry_b[key]
        base = Comparison(
            name,
            metric,
            filt,
            a,
            b,
            0,
            None if a is None or b is None else b - a,
            group=group,
            higher_is_better=_higher_is_better(run_a, run_b, name, metric),
        )
        if a is None or b is None:
            lacking = " and ".join(x for x, v in (("A", a), ("B", b)) if v is None)
            out.append(
                dataclasses.replace(base, note=f"no value in {lacking}{_why_missing(entry_a, entry_b, metric, filt)}")
            )
            continue
        va, vb = pooled_values(run_a, leaves, metric, filt), pooled_values(run_b, leaves, metric, filt)
        if va is None or vb is None:
            out.append(dataclasses.replace(base, note="no per-document values in the samples"))
        elif not (is_mean(va, a) and is_mean(vb, b)):
            out.append(dataclasses.replace(base, n=len(va), note="not a mean of per-document values; no paired test"))
        else:
            out.append(
                _paired(
                    base,
                    va,
                    vb,
                    _scored(run_a, leaves, filt),
                    _why_missing(entry_a, entry_b, metric, filt),
                    (iters, seed, alpha),
                    clusters,
                )
            )
    return out


def _paired(
    base: Comparison,
    va: Mapping[Doc, float],
    vb: Mapping[Doc, float],
    scored: set[Doc],
    why: str,
    test: tuple[int, int, float],
    clusters: Mapping[Doc, Any] | None = None,
) -> Comparison:
    """The paired test over the documents with a value in both runs; the others are counted, and
    the note says how many each run lacks (a judge's unparsed verdicts, ``on_unparsed: exclude``)."""
    paired = sorted(set(va) & set(vb))
    left_out = len(scored | set(va) | set(vb)) - len(paired)
    note = ""
    if left_out:
        lack_a, lack_b = len(scored - set(va)), len(scored - set(vb))
        note = (
            f"{left_out} of {len(scored | set(va) | set(vb))} documents without a value in both "
            f"(A lacks {lack_a}, B lacks {lack_b}{why}); paired on the other {len(paired)}"
        )
    if not paired:
        return dataclasses.replace(base, left_out=left_out, note=note + ": no paired test")
    a, b = [va[d] for d in paired], [vb[d] for d in paired]
    row = _test(base, a, b, *test) if clusters is None else _clustered(base, a, b, _index(paired, clusters), *test)
    return dataclasses.replace(row, left_out=left_out, note=note)


def _why_missing(entry_a: Mapping[str, Any], entry_b: Mapping[str, Any], metric: str, filt: str) -> str:
    """Why a judge metric's documents lack values, when the runs' results say it is one."""
    judged = any(
        k.endswith(f"_unparsed,{filt}") and metric.startswith(k.split("_unparsed,", 1)[0]) for k in (*entry_a, *entry_b)
    )
    return ": judge verdicts unparsed, left out by on_unparsed: exclude" if judged else ""


def _scored(run: Run, leaves: Sequence[str], filt: str) -> set[Doc]:
    return {(task, d) for task in leaves for d in run.doc_ids(task, filt)}


def _higher_is_better(run_a: Run, run_b: Run, name: str, metric: str) -> bool | None:
    """The metric's direction as the runs' results.json record it (lm-eval's ``higher_is_better``)."""
    for run in (run_a, run_b):
        value = run.results.get("higher_is_better", {}).get(name, {}).get(metric)
        if isinstance(value, bool):
            return value
    return None


def pooled_values(run: Run, leaves: Sequence[str], metric: str, filt: str) -> dict[Doc, float] | None:
    """Per-document values over the leaves that report the metric (as the group aggregates them);
    a null or NaN value is no value (left out of the pairing), any other non-number: None."""
    values: dict[Doc, float] = {}
    for task in leaves:
        per_doc = {d: v for d, v in run.per_doc(task, metric, filt).items() if not _missing(v)}
        if not all(_number(v) for v in per_doc.values()):
            return None
        values.update({(task, d): float(v) for d, v in per_doc.items()})
    return values or None


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value))


def is_mean(values: Mapping[Any, float], reported: float) -> bool:
    """Whether the reported number is the mean of the documents' values (the statistic tested)."""
    return bool(values) and math.isclose(sum(values.values()) / len(values), reported, rel_tol=1e-9, abs_tol=1e-9)


def _test(base: Comparison, a: list[float], b: list[float], iters: int, seed: int, alpha: float) -> Comparison:
    boot = paired_bootstrap(a, b, iters, seed)
    if is_binary(a) and is_binary(b):
        p, test = mcnemar_exact(a, b), "mcnemar"
        detectable = mcnemar_detectable(len(a), sum(discordant(a, b)), alpha)
    else:
        p, test = boot.p_value, "bootstrap"
        detectable = bootstrap_detectable(boot.distribution, alpha)
    return dataclasses.replace(
        base, n=len(a), low=boot.low, high=boot.high, p_value=p, test=test, detectable=detectable
    )


def _clustered(
    base: Comparison, a: list[float], b: list[float], index: list[int], iters: int, seed: int, alpha: float
) -> Comparison:
    """The paired test with whole clusters as the units (``index[i]``: document i's cluster, 0..K-1):
    the cluster bootstrap's interval, and for 0/1 metrics Durkalski's clustered McNemar p-value,
    else the cluster bootstrap's."""
    boot = cluster_bootstrap(a, b, index, iters, seed)
    k = max(index) + 1
    binary = is_binary(a) and is_binary(b)
    p = clustered_mcnemar(a, b, index) if binary else boot.p_value
    test = f"{'mcnemar' if binary else 'bootstrap'}, clustered ({k} clusters)"
    detectable = bootstrap_detectable(boot.distribution, alpha)
    return dataclasses.replace(
        base, n=len(a), low=boot.low, high=boot.high, p_value=p, test=test, detectable=detectable, clusters=k
    )


def _clusters(run_a: Run, run_b: Run, leaves: Sequence[str]) -> dict[Doc, Any] | None:
    """Each pooled document's cluster, ``(task, id)``, when a leaf declares clusters (A's record,
    else B's); a leaf without them contributes each of its documents as a cluster of its own.
    None when no leaf has clusters: the plain per-document test."""
    out: dict[Doc, Any] = {}
    for task in leaves:
        ids = run_a.clusters(task) or run_b.clusters(task)
        out.update({(task, d): (task, c) for d, c in (ids or {}).items()})
    return out or None


def _index(paired: Sequence[Doc], clusters: Mapping[Doc, Any]) -> list[int]:
    """Cluster numbers 0..K-1 of the paired documents (a document with no cluster: its own)."""
    numbers: dict[Any, int] = {}
    return [numbers.setdefault(clusters.get(d, ("doc", d)), len(numbers)) for d in paired]


def missing_tasks(run_a: Run, run_b: Run, tasks: Sequence[str] | None = None) -> list[Verdict]:
    """A failing verdict for each of the baseline's ``tasks`` (default: all of them) the candidate
    did not run: ``compare`` pairs the tasks both runs have, so a candidate that dropped a task
    would otherwise pass the gate on the rest."""
    return [
        Verdict(task, True, f"not in B ({run_b.folder}): the candidate has no value to gate")
        for task in (run_a.tasks() if tasks is None else tasks)
        if task not in run_b.tasks()
    ]


def verdicts(rows: Sequence[Comparison], gate: GateSettings) -> list[Verdict]:
    """Each row judged. A metric with no value in B fails: nothing shows the candidate did not
    regress (its judge parsed no verdict); one with no value in A has no baseline: not gated."""
    out = []
    for r in rows:
        name = f"{r.task}{' (group)' if r.group else ''} {r.metric},{r.filter}"
        if r.b is None:
            out.append(Verdict(name, True, f"{r.note}: the candidate has no value to gate"))
        elif r.a is None or r.diff is None:
            out.append(Verdict(name, False, f"not gated: {r.note}, so there is no baseline"))
        else:
            out.append(judge(name, r.diff, r.higher_is_better, r.p_value, gate))
    return out
