"""The task YAMLs shipped in tasks/, each loaded as a TaskConfig (groups left out)."""

from __future__ import annotations

from evalflow.taskspec.format.loader import load_yaml, task_from_dict
from evalflow.taskspec.format.spec import TaskConfig
from tests.support.paths import ROOT

TASKS = ROOT / "tasks"


def all_yaml_tasks() -> dict[str, TaskConfig]:
    """Every built-in task by name, from its YAML file under tasks/."""
    out = {}
    for path in sorted(TASKS.rglob("*.yaml")):
        raw = load_yaml(path)
        if "group" not in raw:
            out[raw["task"]] = task_from_dict(raw, str(path))
    return out
