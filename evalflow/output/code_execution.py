"""What ran a run's code outside evalflow's own interpreter, for the record: the sandbox backend that
ran the programs the model wrote (``code_sandbox``: bubblewrap, or the ``subprocess`` opt-out), and
the side environments (:mod:`evalflow.taskspec.sidenv.envs`) that ran task code, with their
interpreter and packages. A score computed through either depends on it, so a reader of the run
folder must be able to tell which: manifest.json holds it under ``code_execution``, the run's
summary prints it once, ``show`` prints a task's, and ``explain`` names a change between two runs.

It is derived from the tasks and settings alone (what their stage keys hold), so a run served
from the cache records the same as the run that computed it.

    >>> execution = code_execution([], "bwrap")
    >>> execution
    {'sandbox': None, 'side_envs': []}
    >>> summary_lines(execution)
    []
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the reading side (summary, explain) stays light: the scoring registry loads in a second
    from evalflow.taskspec.format.spec import TaskConfig
    from evalflow.taskspec.sidenv.envs import SideEnv


def code_execution(tasks: Sequence[TaskConfig], code_sandbox: str, groups: Iterable[Any] = ()) -> dict[str, Any]:
    """The ``code_execution`` section of manifest.json for ``tasks`` (and the groups' aggregation
    functions): the sandbox, when a task's metrics run programs, and each side environment used."""
    from evalflow.sandbox.registry import sandbox_identity
    from evalflow.scoring.code_exec import runs_code
    from evalflow.taskspec.format.taskcode import function_refs
    from evalflow.taskspec.sidenv.envs import side_env_for

    coding = [t.task for t in tasks if runs_code(t)]
    users: dict[str, tuple[SideEnv, list[str], list[str]]] = {}  # env name -> (env, tasks, modules)
    for owner, refs in [(t.task, function_refs(t)) for t in tasks] + [
        (g.name, function_refs(g.aggregate_metric_list)) for g in groups
    ]:
        for ref in refs:
            env = side_env_for(ref.module_path, ref.source_hash)
            if env is None:
                continue
            _, names, modules = users.setdefault(env.name, (env, [], []))
            names.extend([owner] if owner not in names else [])
            modules.extend([ref.module_path] if ref.module_path not in modules else [])
    return {
        "sandbox": {**sandbox_identity(code_sandbox), "about": _about(code_sandbox), "tasks": coding}
        if coding
        else None,
        "side_envs": [_side_env_record(env, names, modules) for env, names, modules in users.values()],
    }


def task_execution(execution: Mapping[str, Any], task: str) -> dict[str, Any]:
    """One task's part of a ``code_execution`` section (what ``explain`` compares between runs)."""
    box = execution.get("sandbox")
    return {
        "sandbox": {k: v for k, v in box.items() if k != "tasks"} if box and task in box.get("tasks", ()) else None,
        "side_envs": [
            {k: v for k, v in e.items() if k not in ("tasks", "modules")}
            for e in execution.get("side_envs", ())
            if task in e.get("tasks", ())
        ],
    }


def summary_lines(execution: Mapping[str, Any] | None, name_tasks: bool = True) -> list[str]:
    """The lines a run's summary prints about what ran its code (``name_tasks``: and for which
    tasks); none when nothing did."""
    if not execution:
        return []
    lines = []
    box = execution.get("sandbox")
    if box:
        which = f" ({_names(box['tasks'])})" if name_tasks else ""
        lines.append(
            f"code execution: the programs the model wrote{which} run in the sandbox "
            f"'{box['backend']}' (code_sandbox): {box['about']}"
        )
    for env in execution.get("side_envs", ()):
        which = f" of {_names(env['tasks'])}" if name_tasks else ""
        lines.append(
            f"code execution: task code{which} runs in the side environment '{env['name']}': "
            f"{env['interpreter']} with {', '.join(env['packages']) or 'no pins'} from {env['folder']}"
        )
    return lines


def task_lines(task: TaskConfig, code_sandbox: str) -> list[str]:
    """What ``show`` prints of one task's code execution (nothing for a task that runs none)."""
    return summary_lines(code_execution([task], code_sandbox), name_tasks=False)


def _side_env_record(env: SideEnv, tasks: list[str], modules: list[str]) -> dict[str, Any]:
    from evalflow.taskspec.sidenv.provision import env_folder

    return {
        "name": env.name,
        "interpreter": f"{sys.executable} -P",
        "packages": list(env.requirements),
        "folder": str(env_folder(env)),
        "why": env.why,
        "tasks": tasks,
        "modules": modules,
    }


def _about(name: str) -> str:
    """The backend's ``description``: a sentence written for people (a docstring is for its readers)."""
    from evalflow.sandbox.registry import SANDBOXES

    return SANDBOXES.get(name).description


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:4])
    return shown + (f" and {len(names) - 4} more" if len(names) > 4 else "")
