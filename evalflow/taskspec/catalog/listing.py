"""``python -m evalflow ls``: list the tasks, groups and tags the index knows.

Usage::

    python -m evalflow ls                              # built-in tasks/
    python -m evalflow ls include_path=[my_tasks,other]
    python -m evalflow ls --json include_path=my_tasks # {"tasks": [...], "groups": [...], "tags": [...]}
    python -m evalflow ls builtin=false include_path=~/lm-evaluation-harness/lm_eval/tasks

On a terminal the listing is a rich table (up to :data:`RICH_MAX_ROWS` names); otherwise (piped,
e.g. into grep, or very long) it is plain ``kind name source`` columns, one name per line.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TextIO

from evalflow.errors import ConfigError, EvalflowError
from evalflow.taskspec.catalog.index import IndexEntry, TaskIndex

USAGE = "usage: python -m evalflow ls [--json] [include_path=[a,b]] [include_path=a] [builtin=false]"
# A rich table takes ~0.6 ms a row to lay out (9 s for lm-eval's 15k names): larger listings
# are printed as plain columns even on a terminal.
RICH_MAX_ROWS = 1500
_BOOLS = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


def parse_args(argv: list[str]) -> tuple[bool, list[str], bool]:
    """(as_json, include_path, builtin) from ``ls`` arguments in Hydra's ``key=value`` style."""
    as_json, paths, builtin = False, [], True
    for arg in argv:
        key, sep, value = arg.partition("=")
        if arg == "--json":
            as_json = True
        elif sep and key.lstrip("+") == "include_path":
            paths += _list_value(value)
        elif sep and key == "builtin" and value.lower() in _BOOLS:
            builtin = _BOOLS[value.lower()]
        else:
            raise ConfigError(
                f"ls: unknown argument '{arg}'. Allowed: --json, include_path=[a,b] (repeatable), "
                f"builtin=true|false.\n{USAGE}"
            )
    return as_json, paths, builtin


def _list_value(value: str) -> list[str]:
    value = value.strip()
    if value.startswith("[") and value.endswith("]"):
        items = value[1:-1].split(",")
    else:
        items = [value]
    return [item.strip().strip("'\"") for item in items if item.strip().strip("'\"")]


def main(argv: list[str]) -> int:
    """Print the index; exit code 0, or 2 for bad arguments / task folders (message on stderr)."""
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE + "\n\n" + (__doc__ or "").strip())
        return 0
    try:
        as_json, paths, builtin = parse_args(argv)
        index = TaskIndex.build(paths, builtin=builtin)
    except EvalflowError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if as_json:
        names = {"tasks": index.task_names(), "groups": index.group_names(), "tags": index.tag_names()}
        sys.stdout.write(json.dumps(names, indent=1) + "\n")
    elif sys.stdout.isatty() and len(index.names()) <= RICH_MAX_ROWS:
        _print_rich(index)
    else:
        _print_plain(index, sys.stdout)
    if index.problems:
        print(
            f"note: {len(index.problems)} YAML file(s) were skipped as invalid, e.g. "
            f"{index.problems[0][1]}",
            file=sys.stderr,
        )
    return 0


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
        title=f"{len(index.task_names())} tasks, {len(index.group_names())} groups, "
        f"{len(index.tag_names())} tags"
    )
    for column in ("kind", "name", "source"):
        table.add_column(column)
    for row in _rows(index):
        table.add_row(*row)
    Console().print(table)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
