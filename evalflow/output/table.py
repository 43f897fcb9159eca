"""The results tables printed at the end of a run, in lm-eval's columns and layout.

Tasks first, each group followed by its subtasks indented (``" - "`` per level), then a second
table of the groups alone, as lm-eval prints them. On a terminal the tables are drawn by rich; when
stdout is a file or a pipe they are printed as markdown with full task names (lm-eval's format), so
``python -m evalflow ... > results.md`` holds the table and nothing else (logs go to stderr).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TextIO

from evalflow.output.run_paths import samples_name

COLUMNS = ("Tasks", "Version", "Filter", "n-shot", "Metric", "", "Value", "", "Stderr")
RIGHT = ("Version", "n-shot", "Value", "Stderr", "Truncated")
TRUNCATED = "Truncated"  # the column added when some task's generations were cut off


def truncated_shares(results: Mapping[str, Any]) -> dict[str, float] | None:
    """Each task's share of cut-off generations (results.json's ``generations``), or None when no
    task had one cut off: the table then keeps lm-eval's columns."""
    shares = {task: stats["truncated_share"] for task, stats in (results.get("generations") or {}).items()}
    return shares if any(shares.values()) else None


def results_rows(results: Mapping[str, Any], groups_only: bool = False) -> list[list[str]]:
    """One row per (task or group, filter, metric), tasks in tree order with indented names; with a
    last cell, the task's truncated share, when some task's generations were cut off."""
    shares = truncated_shares(results)
    rows = _metric_rows(results, groups_only)
    if shares is None or groups_only:
        return [row for row, _ in rows]
    return [[*row, f"{100 * shares[name]:.1f}%" if name in shares else ""] for row, name in rows]


def _metric_rows(results: Mapping[str, Any], groups_only: bool) -> list[tuple[list[str], str]]:
    rows: list[tuple[list[str], str]] = []
    subtasks: Mapping[str, Sequence[str]] = results.get("group_subtasks", {})
    groups = {g for g, members in subtasks.items() if members}  # lm-eval lists leaf tasks with []
    for name, depth in _tree(results):
        if groups_only and name not in groups:
            continue
        entry = results["results"].get(name, {})
        label = (" " * (depth - 1) + " - " if depth else "") + str(entry.get("alias", name)).strip()
        version = str(results.get("versions", {}).get(name, ""))
        shots = "" if name in groups else str(results.get("n-shot", {}).get(name, ""))
        hib = results.get("higher_is_better", {}).get(name, {})
        metrics = [(k, v) for k, v in entry.items() if "," in k and "_stderr," not in k]
        if not metrics:
            rows.append(([label, version, "", shots, "", "", "", "", ""], name))
        for key, value in metrics:
            metric, filt = key.split(",", 1)
            stderr = entry.get(f"{metric}_stderr,{filt}", "")
            arrow = "↑" if hib.get(metric, True) else "↓"
            rows.append(([label, version, filt, shots, metric, arrow, _fmt(value), "±", _fmt(stderr)], name))
    return rows


def _tree(results: Mapping[str, Any]) -> Iterator[tuple[str, int]]:
    """Names in display order with their depth: top-level groups with their members, then the rest."""
    subtasks: Mapping[str, Sequence[str]] = results.get("group_subtasks", {})
    members = {m for ms in subtasks.values() for m in ms}
    seen: set[str] = set()

    def walk(name: str, depth: int) -> Iterator[tuple[str, int]]:
        if name in seen:
            return
        seen.add(name)
        yield name, depth
        for member in subtasks.get(name, ()):
            yield from walk(member, depth + 1)

    for name in results.get("results", {}):
        if name not in members:
            yield from walk(name, 0)
    for name in results.get("results", {}):  # members of a group not in these results
        yield from walk(name, 0)


def print_results(results: Mapping[str, Any], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    columns = COLUMNS if truncated_shares(results) is None else (*COLUMNS, TRUNCATED)
    print_table("evalflow results", columns, results_rows(results), RIGHT, out)
    if results.get("group_subtasks"):
        groups = results_rows(results, groups_only=True)
        if groups:
            print("", file=out)
            print_table("groups", ("Groups",) + COLUMNS[1:], groups, RIGHT, out)
    for line in no_value_lines(results):
        print(line, file=out)


def no_value_lines(results: Mapping[str, Any]) -> list[str]:
    """One plain line per result that has no value (``null`` in results.json): a judge metric
    none of whose documents got a parsed verdict, which the table alone would show as a gap.

    >>> results = {"results": {"t": {"ok,none": None, "ok_unparsed,none": 5}}, "n-samples": {"t": {"effective": 5}}}
    >>> (line,) = no_value_lines(results)
    >>> print(line)  # doctest: +NORMALIZE_WHITESPACE
    NO VALUE: t ok,none: none of its 5 documents has one; the judge answered 5 times unparsed
    (ok_unparsed,none) and on_unparsed: exclude left each out; see the judge_output entries in
    samples_t.jsonl, or score them with on_unparsed: NUMBER
    """
    lines = []
    for task, entry in results.get("results", {}).items():
        docs = results.get("n-samples", {}).get(task, {}).get("effective")
        for key, value in entry.items():
            if value is not None or "," not in key or "_stderr," in key:
                continue
            metric, filt = key.split(",", 1)
            counts = [
                (k, v)
                for k, v in entry.items()
                if k.endswith(f"_unparsed,{filt}") and metric.startswith(k.split("_unparsed,")[0])
            ]
            why = (
                f"the judge answered {counts[0][1]} times unparsed ({counts[0][0]}) and on_unparsed: exclude left "
                "each out"
                if counts
                else "no document has a value"
            )
            lines.append(
                f"NO VALUE: {task} {key}: none of its {docs if docs is not None else 'scored'} documents has one; "
                f"{why}; see the judge_output entries in {samples_name(task)}, or score them with on_unparsed: NUMBER"
            )
    return lines


def print_table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    right: Sequence[str] = (),
    out: TextIO | None = None,
) -> None:
    """A rich table on a terminal; markdown (full cell text, never cut) anywhere else."""
    out = out or sys.stdout
    if getattr(out, "isatty", lambda: False)():
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title)
        for col in columns:
            table.add_column(col, justify="right" if col in right else "left")
        for row in rows:
            table.add_row(*row)
        Console(file=out).print(table)
    else:
        out.write(markdown_table(columns, rows, right))


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[str] = ()) -> str:
    """lm-eval's markdown layout: padded cells, ``---:`` under right-aligned columns."""
    cells = [[str(c).replace("|", "\\|") for c in row] for row in [list(columns), *rows]]
    widths = [max(3, *(len(r[i]) for r in cells)) for i in range(len(columns))]

    def line(row: Sequence[str]) -> str:
        return (
            "|"
            + "|".join(c.rjust(w) if col in right else c.ljust(w) for c, w, col in zip(row, widths, columns))
            + "|\n"
        )

    rule = "|" + "|".join("-" * (w - 1) + ":" if col in right else "-" * w for w, col in zip(widths, columns)) + "|\n"
    return line(cells[0]) + rule + "".join(line(r) for r in cells[1:])


def _fmt(value: Any) -> str:
    if value is None:
        return "no value"  # a judge result whose every verdict was unparsed (no_value_lines says so)
    return f"{value:.4f}" if isinstance(value, float) else str(value)
