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

from evalflow.commands.words import asks_for_help, print_help
from evalflow.errors import ConfigError, EvalflowError
from evalflow.taskspec.catalog.index import TaskIndex
from evalflow.taskspec.catalog.listing import write_listing

USAGE = "usage: python -m evalflow ls [--json] [include_path=[a,b]] [include_path=a] [builtin=false]"
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
    items = value[1:-1].split(",") if value.startswith("[") and value.endswith("]") else [value]
    return [item.strip().strip("'\"") for item in items if item.strip().strip("'\"")]


def main(argv: list[str]) -> int:
    """Print the index; exit code 0, or 2 for bad arguments / task folders (message on stderr)."""
    if asks_for_help(argv):
        print_help(__doc__, USAGE)
        return 0
    try:
        as_json, paths, builtin = parse_args(argv)
        index = TaskIndex.build(paths, builtin=builtin)
    except EvalflowError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_listing(index, as_json)
    return 0
