"""What the task index says of installed task libraries and of task code it was told to trust.

``task_library=[lm_eval]`` (what ``evalflow lm-eval`` sets) indexes lm-eval's installed task folder
beneath the built-in tasks, so lm-eval's own names resolve as they do in lm-eval. The library is an
optional extra: where it is not installed the index is built without it, and a name it does not
know gets one paragraph naming the extra, before any model call, instead of "did you mean".

A run that trusts task code (``trust_task_code=true``, which the lm-eval front door sets for the
folders and YAML files a user names, as lm-eval trusts them) says in one line per folder whose code
it runs, so running someone's ``utils.py`` is never silent.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from evalflow.errors import TaskError
from evalflow.taskspec.catalog.selection import Selection
from evalflow.taskspec.format.installed import TASK_LIBRARIES, library_folder, package_module
from evalflow.taskspec.format.taskcode import function_refs


def library_roots(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the task folders of the installed libraries among ``names``, the names not installed here)."""
    roots: list[str] = []
    missing: list[str] = []
    for name in names:
        if name not in TASK_LIBRARIES:
            raise TaskError(
                f"task_library={name}: evalflow knows the task libraries {', '.join(sorted(TASK_LIBRARIES))}; "
                "a folder of task YAMLs goes in include_path=[...] instead."
            )
        try:
            roots.append(library_folder(name) or "")
        except TaskError:  # not installed: its names are unknown, and an unknown name says why
            missing.append(name)
    return roots, missing


def missing_library_paragraph(unknown: Sequence[str], missing: Sequence[str]) -> str:
    """Why ``unknown`` names resolve nowhere when the libraries ``missing`` are not installed."""
    extras = sorted({TASK_LIBRARIES[name][2] for name in missing})
    names = ", ".join(f"'{name}'" for name in unknown)
    return (
        f"unknown task, group or tag {names}: not one of evalflow's built-in tasks, and lm-eval's own task "
        f"names (ifeval, truthfulqa_mc2, leaderboard_*, ...) come from its task library, the Python package "
        f"'{TASK_LIBRARIES[missing[0]][0]}', which is not installed here. Install it with "
        + " and ".join(f"pip install 'evalflow[{extra}]'" for extra in extras)
        + "; `python -m evalflow ls` lists the built-in tasks, and a task of your own is a YAML path "
        "or an include_path=[folder] name."
    )


def trusted_code_lines(selection: Selection, roots: Sequence[str], builtin: Path) -> list[str]:
    """One line per folder (the index root holding the code, else the module's folder) whose task
    code the selection runs because the run trusts it: code outside the built-in tasks and
    outside any installed package (which needs no trust)."""
    inside = os.path.realpath(builtin) + os.sep
    by_folder: dict[str, list[str]] = {}
    for ref in function_refs([*selection.tasks, *selection.groups]):
        path = os.path.realpath(ref.module_path)
        if path.startswith(inside) or package_module(path) is not None:
            continue
        folder = max((r for r in roots if path.startswith(r + os.sep)), key=len, default=os.path.dirname(path))
        attrs = by_folder.setdefault(folder, [])
        name = f"{Path(path).stem}.{ref.attr}"
        if name not in attrs:
            attrs.append(name)
    return [
        f"running task code from {folder} ({', '.join(attrs)}): trust_task_code=true trusts the folders and "
        "files you name, as lm-eval does"
        for folder, attrs in by_folder.items()
    ]
