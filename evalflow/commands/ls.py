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

import sys

from evalflow.commands.reference import print_help
from evalflow.commands.words import Command, Flag, Option, asks_for_help, boolean, folder_list, parse_words
from evalflow.errors import EvalflowError
from evalflow.taskspec.catalog.index import TaskIndex
from evalflow.taskspec.catalog.listing import write_listing

COMMAND = Command(
    "ls",
    "list tasks, groups and tags",
    max_positional=0,
    options=(
        Option("include_path", folder_list, None, "task folders scanned after the built-in tasks/", many=True),
        Option("builtin", boolean, True, "list the built-in tasks/ too"),
    ),
    flags=(Flag("--json", 'print {"tasks": [...], "groups": [...], "tags": [...]} instead of a table'),),
    doc=__doc__ or "",
)


def parse_args(argv: list[str]) -> tuple[bool, list[str], bool]:
    """(as_json, include_path, builtin) from ``ls`` arguments in Hydra's ``key=value`` style."""
    words = parse_words(argv, COMMAND)
    return "--json" in words.flags, list(words.value("include_path") or []), words.value("builtin")


def main(argv: list[str]) -> int:
    """Print the index; exit code 0, or 2 for bad arguments / task folders (message on stderr)."""
    if asks_for_help(argv):
        print_help(COMMAND)
        return 0
    try:
        as_json, paths, builtin = parse_args(argv)
        index = TaskIndex.build(paths, builtin=builtin)
    except EvalflowError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_listing(index, as_json)
    return 0
