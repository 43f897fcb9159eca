"""lm-eval 0.4.13's ``ls`` and ``validate`` subcommands under ``python -m evalflow lm-eval``, answered
from the task index the front door runs with (lm-eval's task library beneath evalflow's built-in
tasks, the ``--include_path`` folder above both):

    python -m evalflow lm-eval ls tasks|groups|subtasks|tags [--include_path DIR]
    python -m evalflow lm-eval validate --tasks ifeval,my_task [--include_path DIR]

``ls`` prints lm-eval's Markdown tables (``TaskManager.list_all_tasks``); ``validate`` prints
lm-eval's lines ("Validating tasks: [...]", "Tasks not found: ..." with exit code 1, "All tasks
found and valid") around ``python -m evalflow validate``, which checks more than lm-eval's name
check: each task's YAML, metrics, filters and task code, and its first documents rendered (so it
needs the tasks' data, exit code 2 when a task fails).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from evalflow.lmeval_compat.args import hydra_value
from evalflow.lmeval_compat.parser import subcommand_parser
from evalflow.lmeval_compat.task_settings import LIBRARY, task_settings
from evalflow.taskspec.catalog.index import TaskIndex
from evalflow.taskspec.catalog.libraries import missing_library_paragraph

RUNS_ELSEWHERE = ("ls", "validate")  # lm-eval's subcommands other than run (lmeval_compat/parser.py)


def run_subcommand(name: str, argv: list[str], check_tasks: Callable[[list[str]], int]) -> int:
    """lm-eval's ``name`` subcommand with its arguments ``argv``; the exit code. ``check_tasks`` is
    ``python -m evalflow validate``'s main (given by the command line, the room above this one)."""
    parser = subcommand_parser(name)
    ns = parser.parse_args(argv)
    index = TaskIndex.build([ns.include_path] if ns.include_path else [], library=[LIBRARY])
    if index.missing_libraries:
        print(
            f"evalflow lm-eval {name}: lm-eval's task library is not installed, so only evalflow's built-in "
            "tasks are indexed: pip install 'evalflow[lm-eval-tasks]'",
            file=sys.stderr,
        )
    if name == "ls":
        return _ls(parser, ns, index)
    return _validate(ns, index, check_tasks)


def _ls(parser: argparse.ArgumentParser, ns: argparse.Namespace, index: TaskIndex) -> int:
    from evalflow.taskspec.catalog.listing import lm_eval_tables

    if ns.what is None:  # lm-eval prints the subcommand's help
        parser.print_help()
        return 0
    shown = {
        "tasks": {},
        "groups": {"subtasks": False, "tags": False},
        "subtasks": {"groups": False, "tags": False},
        "tags": {"groups": False, "subtasks": False},
    }[ns.what]
    print(lm_eval_tables(index, **shown))
    return 0


def _validate(ns: argparse.Namespace, index: TaskIndex, check_tasks: Callable[[list[str]], int]) -> int:
    from evalflow.taskspec.catalog.index import is_task_path

    names = ns.tasks.split(",")
    print(f"Validating tasks: {names}")
    missing = [name for name in names if index.entry(name) is None and not is_task_path(name)]
    if missing:
        print(f"Tasks not found: {', '.join(missing)}")
        if index.missing_libraries:
            print(missing_library_paragraph(missing, index.missing_libraries), file=sys.stderr)
        return 1
    # the run's own task settings: the library, trust for named folders; unsafe_code tasks are only
    # read here (no model writes a program), so they are confirmed
    given = argparse.Namespace(tasks=[ns.tasks], include_path=ns.include_path, confirm_run_unsafe_code=True)
    overrides, _notes = task_settings(given)
    words = [f"task={hydra_value(names)}", *overrides, "confirm_unsafe_code=true"]
    words += [f"include_path={hydra_value([ns.include_path])}"] if ns.include_path else []
    code = check_tasks(words)
    if code == 0:
        print("All tasks found and valid")
    return code
