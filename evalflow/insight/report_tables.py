"""The report's results as one table per group, the runs side by side.

A suite such as mmlu (57 subjects in 4 category groups) used to give one 60-row table per run and
then the paired table; a release review reads it group by group instead. Each group gets a table
of its own rows and its member groups' rows, with its leaf subtasks folded under it (the page puts
them in a ``<details>``), and tasks outside every group get one table of their own. Each row
holds every run's value ± stderr; with two runs that pair, also B − A, the 95% interval, p, the
test and the documents paired from :func:`evalflow.insight.comparison.compare`, and a row whose p is
below :data:`SIGNIFICANT` is marked.

    sections = result_sections(runs, labels, compare(runs[0], runs[1]))
    sections[0].title, [line.cells for line in sections[0].head]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalflow.insight.comparison import Comparison
from evalflow.output.run_folder import Run, metric_keys

SIGNIFICANT = 0.05  # p below this marks a row (uncorrected: with 60 rows, ~3 are marked by chance)
MISSING = "—"  # a run without this task or metric


@dataclass(frozen=True)
class Line:
    """One row: a task's (or group's) metric under one filter, across the runs."""

    name: str  # the alias shown, e.g. "stem (group)" or "anatomy"
    task: str  # the results key, e.g. "mmlu_stem"
    metric: str  # "acc,none"
    arrow: str  # "↑" or "↓": whether higher is better
    values: tuple[str, ...]  # per run "0.2632 ± 0.0078", or MISSING
    paired: tuple[str, ...] = ()  # B − A, 95% CI, p, test, docs (+ extra fields of Comparison)
    significant: bool = False
    direction: str = ""  # "better" / "worse" for B relative to A when significant


@dataclass(frozen=True)
class Section:
    """One group's table: its own rows and its member groups' (head), its leaf subtasks (folded)."""

    title: str
    head: tuple[Line, ...]
    folded: tuple[Line, ...]

    @property
    def folded_significant(self) -> int:
        return sum(line.significant for line in self.folded)


def paired_columns(comparison: Sequence[Comparison]) -> tuple[str, ...]:
    """Headers of the paired cells; ``detectable`` appears when compare() gives it."""
    extra = ("Detectable",) if any(getattr(c, "detectable", None) is not None for c in comparison) else ()
    return ("B − A", "95% CI", "p", "Test", "Docs", *extra) if comparison else ()


def result_sections(runs: Sequence[Run], labels: Sequence[str], comparison: Sequence[Comparison]) -> list[Section]:
    """The tables, groups in tree order (outer groups first), ungrouped tasks last."""
    subtasks = _group_subtasks(runs)
    names = list(dict.fromkeys(n for r in runs for n in r.results.get("results", {})))
    paired = {(c.task, f"{c.metric},{c.filter}"): c for c in comparison}
    extra = len(paired_columns(comparison)) > 5

    def lines(name: str) -> list[Line]:
        return _lines(runs, name, name in subtasks, paired, extra)

    sections = []
    for group in _groups_in_order(names, subtasks):
        members = [m for m in subtasks[group] if m in names]
        head = lines(group) + [line for m in members if m in subtasks for line in lines(m)]
        folded = [line for m in members if m not in subtasks for line in lines(m)]
        sections.append(Section(_alias(runs, group), tuple(head), tuple(folded)))
    grouped = {m for ms in subtasks.values() for m in ms} | set(subtasks)
    loose = [line for n in names if n not in grouped for line in lines(n)]
    if loose:
        sections.append(Section("Tasks" if sections else "", tuple(loose), ()))
    return sections


def left_out_notes(runs: Sequence[Run], labels: Sequence[str]) -> list[str]:
    """What the tables show as MISSING, and why: a task some runs do not have."""
    names = list(dict.fromkeys(n for r in runs for n in r.results.get("results", {})))
    notes = []
    for name in names:
        having = [i for i, r in enumerate(runs) if name in r.results.get("results", {})]
        if len(having) < len(runs):
            notes.append(f"{name} is only in {_which(having, labels)}")
    return notes


def _which(indices: Sequence[int], labels: Sequence[str]) -> str:
    return ", ".join(labels[i] for i in indices)


def _group_subtasks(runs: Sequence[Run]) -> dict[str, list[str]]:
    """Each group's direct members, over all runs (lm-eval lists leaf tasks with [])."""
    out: dict[str, list[str]] = {}
    for run in runs:
        for group, members in run.results.get("group_subtasks", {}).items():
            if members:
                out.setdefault(group, [])
                out[group].extend(m for m in members if m not in out[group])
    return out


def _groups_in_order(names: Sequence[str], subtasks: Mapping[str, Sequence[str]]) -> list[str]:
    """Groups depth-first from the outermost, as lm-eval prints its tree."""
    members = {m for ms in subtasks.values() for m in ms}
    order: list[str] = []

    def walk(group: str) -> None:
        if group in order or group not in names:
            return
        order.append(group)
        for member in subtasks.get(group, ()):
            if member in subtasks:
                walk(member)

    for name in names:
        if name in subtasks and name not in members:
            walk(name)
    for name in names:  # groups whose parent is not in these results
        if name in subtasks:
            walk(name)
    return order


def _alias(runs: Sequence[Run], name: str) -> str:
    for run in runs:
        entry = run.results.get("results", {}).get(name)
        if entry is not None:
            return str(entry.get("alias", name)).strip().lstrip("- ").strip() or name
    return name


def _lines(
    runs: Sequence[Run], name: str, is_group: bool, paired: Mapping[tuple[str, str], Comparison], extra: bool
) -> list[Line]:
    entries = [r.results.get("results", {}).get(name) for r in runs]
    keys = list(dict.fromkeys(f"{m},{f}" for e in entries if e for m, f in metric_keys(e)))
    label = _alias(runs, name) + (" (group)" if is_group else "")
    out = []
    for key in keys:
        metric = key.split(",", 1)[0]
        higher = _higher_is_better(runs, name, metric)
        values = tuple(_value(e, key) for e in entries)
        c = paired.get((name, key))
        if c is None:
            out.append(Line(label, name, key, "↑" if higher else "↓", values))
            continue
        significant = c.p_value is not None and c.p_value < SIGNIFICANT
        higher = higher if c.higher_is_better is None else c.higher_is_better  # compare()'s own, where it gives one
        direction = _direction(c.diff, higher) if significant else ""
        out.append(
            Line(label, name, key, "↑" if higher else "↓", values, _paired_cells(c, extra), significant, direction)
        )
    return out


def _direction(diff: float | None, higher_is_better: bool) -> str:
    """A significant row's word: B's value better or worse than A's (none for no difference)."""
    if diff is None or diff == 0:
        return ""
    return "better" if (diff > 0) == higher_is_better else "worse"


def _higher_is_better(runs: Sequence[Run], name: str, metric: str) -> bool:
    for run in runs:
        hib = run.results.get("higher_is_better", {}).get(name, {})
        if metric in hib:
            return bool(hib[metric])
    return True


def _value(entry: Mapping[str, Any] | None, key: str) -> str:
    if not entry or key not in entry:
        return MISSING
    metric, filt = key.split(",", 1)
    stderr = entry.get(f"{metric}_stderr,{filt}")
    value = _num(entry[key])
    return f"{value} ± {_num(stderr)}" if isinstance(stderr, (int, float)) else value


def _num(x: Any, sign: bool = False) -> str:
    if not isinstance(x, (int, float)):
        return str(x)
    return f"{x:+.4f}" if sign else f"{x:.4f}"


def _paired_cells(c: Comparison, extra: bool) -> tuple[str, ...]:
    ci = f"[{_num(c.low, True)}, {_num(c.high, True)}]" if c.low is not None and c.high is not None else ""
    p = "" if c.p_value is None else f"{c.p_value:.3g}"
    cells = (_num(c.diff, True), ci, p, c.test or c.note, str(c.n))
    if not extra:
        return cells
    detectable = getattr(c, "detectable", None)
    shown = (
        ""
        if detectable is None
        else ("yes" if detectable is True else "no" if detectable is False else _num(detectable))
    )
    return (*cells, shown)
