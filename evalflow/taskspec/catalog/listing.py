"""The listing ``python -m evalflow ls`` prints of the tasks, groups and tags the index knows.

On a terminal the listing is a rich table (up to :data:`RICH_MAX_ROWS` names); otherwise (piped,
e.g. into grep, or very long) it is plain ``kind name source`` columns, one name per line.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from evalflow.taskspec.catalog.index import IndexEntry, TaskIndex

# A rich table takes ~0.6 ms a row to lay out (9 s for lm-eval's 15k names): larger listings
# are printed as plain columns even on a terminal.
RICH_MAX_ROWS = 1500


def write_listing(index: TaskIndex, as_json: bool) -> None:
    """The index on stdout (JSON names, a rich table, or plain columns); invalid YAML files it
    skipped counted on stderr."""
    if as_json:
        names = {"tasks": index.task_names(), "groups": index.group_names(), "tags": index.tag_names()}
        sys.stdout.write(json.dumps(names, indent=1) + "\n")
    elif sys.stdout.isatty() and len(index.names()) <= RICH_MAX_ROWS:
        _print_rich(index)
    else:
        _print_plain(index, sys.stdout)
    if index.problems:
        print(
            f"note: {len(index.problems)} YAML file(s) were skipped as invalid, e.g. {index.problems[0][1]}",
            file=sys.stderr,
        )


def _rows(index: TaskIndex) -> list[tuple[str, str, str]]:
    """(kind, name, where) for groups, tags, then tasks, each sorted by name."""
    rows = []
    kinds = (("group", index.group_names()), ("tag", index.tag_names()), ("task", index.task_names()))
    for kind, names in kinds:
        for name in names:
            entry = index.entry(name)
            assert entry is not None  # names come from the index itself
            rows.append((kind, name, _where(entry, index.roots)))
    return rows


def _where(entry: IndexEntry, roots: tuple[str, ...]) -> str:
    if entry.kind == "tag":
        count = len(entry.members)
        return f"{count} task{'s' if count != 1 else ''}"
    for root in roots:
        if entry.path.startswith(root + os.sep):
            where = os.path.join(os.path.basename(root), entry.path[len(root) + 1 :])
            break
    else:
        where = entry.path
    if entry.item is not None:
        where += f" (task_list {entry.item})"
    return where + (" (python class)" if entry.python else "")


def _print_plain(index: TaskIndex, out: TextIO) -> None:
    rows = _rows(index)
    width = max((len(name) for _, name, _ in rows), default=4)
    out.write("".join(f"{kind:<5}  {name:<{width}}  {where}\n" for kind, name, where in rows))


def _print_rich(index: TaskIndex) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"{len(index.task_names())} tasks, {len(index.group_names())} groups, {len(index.tag_names())} tags"
    )
    for column in ("kind", "name", "source"):
        table.add_column(column)
    for row in _rows(index):
        table.add_row(*row)
    Console().print(table)


def lm_eval_tables(index: TaskIndex, *, groups: bool = True, tags: bool = True, subtasks: bool = True) -> str:
    """lm-eval 0.4.13's ``ls`` text (``TaskManager.list_all_tasks``): the groups, tags and tasks as
    Markdown tables laid out as its pytablewriter lays them, paths under lm-eval's package as
    ``lm_eval/tasks/...``; a task's output type read from its YAML (includes merged)."""
    tables = []
    if groups:
        tables.append(
            _markdown(("Group", "Config Location"), [(g, _lm_eval_path(index, g)) for g in index.group_names()])
        )
    if tags:
        tables.append(_markdown(("Tag",), [(t,) for t in index.tag_names()]))
    if subtasks:
        rows = [(t, _lm_eval_path(index, t), _output_type(index, t)) for t in index.task_names()]
        tables.append(_markdown(("Task", "Config Location", "Output Type"), rows))
    return "\n" + "".join(table + "\n\n" for table in tables)


def _lm_eval_path(index: TaskIndex, name: str) -> str:
    entry = index.entry(name)
    path = entry.path if entry is not None else ""
    marker = f"lm_eval{os.sep}tasks{os.sep}"
    return "lm_eval/tasks/" + path.split(marker)[-1] if marker in path else path or "---"


def _output_type(index: TaskIndex, name: str) -> str:
    from evalflow.errors import TaskError
    from evalflow.taskspec.catalog.groups import entry_config

    entry = index.entry(name)
    try:
        value = entry_config(entry).get("output_type", "") if entry is not None and not entry.python else ""
    except TaskError:  # a file the index read but whose includes fail: lm-eval lists it too, without a type
        value = ""
    return value if isinstance(value, str) else ""


def _markdown(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    """pytablewriter's Markdown: headers centred (extra space on the right), cells left-aligned."""
    widths = [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "|" + "|".join(cells) + "|"

    head = [" " * ((w - len(h)) // 2) + h + " " * (w - len(h) - (w - len(h)) // 2) for h, w in zip(headers, widths)]
    body = [line([cell.ljust(w) for cell, w in zip(row, widths)]) for row in rows]
    return "".join(text + "\n" for text in [line(head), line(["-" * w for w in widths]), *body])
