"""The run settings the lm-eval front door adds for the tasks it is given, so they resolve and run as
lm-eval's do, where the native command line asks for each explicitly:

* ``task_library=[lm_eval]``: lm-eval's task index is its own installed library, so every lm-eval
  task name resolves (``ifeval``, ``truthfulqa_mc2``, ``leaderboard_*``); evalflow's built-in tasks
  sit above it and win for a name both define (their copies: the same prompts, their code metrics
  in the sandbox). Without the library installed, a name it would know gets the paragraph naming
  ``evalflow[lm-eval-tasks]`` (:mod:`evalflow.taskspec.catalog.libraries`);
* ``trust_task_code=true`` when the command names a task folder or file (``--include_path DIR``,
  ``--tasks DIR`` or ``--tasks x.yaml``): lm-eval runs their ``!function`` code, the user having
  named them; the index prints one line naming each folder whose code runs;
* ``--confirm_run_unsafe_code``: lm-eval runs model-written programs in its own process, with no
  sandbox; evalflow runs them in the strongest sandbox this machine has (bubblewrap, else the
  subprocess sandbox: its limits without isolation), and says which in one line.
"""

from __future__ import annotations

import argparse
import fnmatch
import glob
import os

from evalflow.errors import ConfigError
from evalflow.sandbox.registry import sandbox
from evalflow.taskspec.catalog.index import TaskIndex

LIBRARY = "lm_eval"  # the task library (evalflow.taskspec.format.installed.TASK_LIBRARIES) lm-eval indexes
ISOLATED, FALLBACK = "bwrap", "subprocess"  # the code_sandbox backends, strongest first
_GLOB = frozenset("*?[")  # a --tasks word holding one of these is a pattern (lm-eval's fnmatch)


def matched_tasks(words: list[str], include_path: str | None) -> tuple[str, ...]:
    """lm-eval's ``--tasks`` words, each pattern expanded as lm-eval 0.4.13 expands it: a name pattern
    (``mmlu_*``) over every task, group and tag name of the index (``TaskManager.match_tasks``:
    fnmatch, sorted), a YAML path pattern over the files (glob); each name once, in the order given.
    The index is built only when a word is a pattern."""
    index: TaskIndex | None = None
    out: list[str] = []
    for word in words:
        if not _GLOB & set(word):
            matches = [word]
        elif word.endswith((".yaml", ".yml")):
            matches = sorted(glob.glob(word))
        else:
            index = index or TaskIndex.build([include_path] if include_path else [], library=[LIBRARY])
            matches = sorted(fnmatch.filter(index.names(), word))
        if not matches:
            raise ConfigError(
                f"--tasks {word}: no task, group or tag name matches this pattern (lm-eval's glob, matched "
                "over the task index); `python -m evalflow lm-eval ls tasks` lists the names"
            )
        out.extend(match for match in matches if match not in out)
    return tuple(out)


def task_settings(ns: argparse.Namespace) -> tuple[list[str], list[str]]:
    """(overrides, notes) for lm-eval's ``--tasks``, ``--include_path`` and ``--confirm_run_unsafe_code``."""
    overrides = [f"task_library=[{LIBRARY}]"]
    notes: list[str] = []
    if named_paths(ns):
        overrides.append("trust_task_code=true")
    if ns.confirm_run_unsafe_code:
        backend, note = strongest_sandbox()
        overrides.append(f"code_sandbox={backend}")
        notes.append(note)
    return overrides, notes


def named_paths(ns: argparse.Namespace) -> list[str]:
    """The task folders and files the command names (lm-eval trusts their code)."""
    words = [t for word in ns.tasks or () for t in word.split(",") if t]
    paths = [t for t in words if t.endswith((".yaml", ".yml")) or os.sep in t or os.path.isdir(t)]
    return ([ns.include_path] if ns.include_path else []) + paths


def strongest_sandbox() -> tuple[str, str]:
    """(the backend, the line saying so): bubblewrap where it runs, else the subprocess sandbox."""
    why = sandbox(ISOLATED).unavailable()
    if why is None:
        return ISOLATED, (
            "--confirm_run_unsafe_code: model-written programs run in the bubblewrap sandbox "
            f"(code_sandbox={ISOLATED}: read-only files, no network); lm-eval runs them in its own process"
        )
    return FALLBACK, (
        f"--confirm_run_unsafe_code: bubblewrap cannot run here ({why}), so model-written programs run in the "
        f"subprocess sandbox (code_sandbox={FALLBACK}: CPU, memory, process and time limits, no isolation; "
        "install bubblewrap to isolate them); lm-eval runs them in its own process, with neither"
    )
