"""lm-eval 0.4.13's ``TaskManager`` and ``get_task_dict`` over evalflow's task index, and what
evalflow's functions read from lm-eval's own ``TaskManager`` and task dicts.

    from evalflow.lm_eval.tasks import TaskManager, get_task_dict   # or lm_eval.tasks: both are accepted
    tm = TaskManager(include_path="my_tasks", include_defaults=False, metadata={"max_seq_lengths": [4096]})
    simple_evaluate(model="hf", model_args="pretrained=...", tasks=["my_task"], task_manager=tm)

A manager is its settings (:class:`ManagerSettings`): the folders it indexes (``include_path``, one
path or a list, as lm-eval takes it), whether the built-in tasks are indexed too
(``include_defaults``) and the metadata merged into every task's. evalflow's manager loads no task
objects: ``load`` and ``get_task_dict`` give :class:`TaskRef` entries, which evalflow's
``evaluate`` runs through its stages (an lm-eval manager's Task objects are run by their configs:
:mod:`evalflow.lmeval_compat.task_specs`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalflow.errors import ConfigError, TaskError
from evalflow.taskspec.catalog.index import TaskIndex


@dataclass(frozen=True)
class ManagerSettings:
    """What a task manager decides of a run: its folders, the built-in tasks or not, metadata."""

    include_path: tuple[str, ...] = ()
    include_defaults: bool = True
    metadata: Mapping[str, Any] | None = None

    def index(self) -> TaskIndex:
        return TaskIndex.build(self.include_path, builtin=self.include_defaults)

    def check_names(self, names: Sequence[str]) -> None:
        """Every name must resolve in this manager's index (with ``include_defaults=False``, in the
        include folders alone, as lm-eval indexes nothing else); raises the paragraph naming the
        unknown ones, before any model call."""
        if not names:
            return
        try:
            self.index().resolve(list(names), trust_task_code=True)
        except TaskError as exc:
            only = (
                ""
                if self.include_defaults
                else (
                    f"task_manager has include_defaults=False, so only the tasks of include_path "
                    f"{list(self.include_path)} are known (as lm-eval indexes them): "
                )
            )
            raise ConfigError(only + str(exc)) from None


def include_paths(value: str | Path | Sequence[str | Path] | None) -> tuple[str, ...]:
    """lm-eval's ``include_path``: one path (a str or Path, never split into characters) or a list."""
    if value is None:
        return ()
    if isinstance(value, (str, Path)):
        return (str(value),)
    return tuple(str(p) for p in value)


class TaskManager:
    """lm-eval's ``TaskManager(verbosity, include_path, include_defaults, metadata)``, indexing with
    evalflow's task index (the same names: tasks, groups, tags)."""

    def __init__(
        self,
        verbosity: str | None = None,
        include_path: str | Path | Sequence[str | Path] | None = None,
        include_defaults: bool = True,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        self.include_path = include_path
        self.metadata = metadata
        self.settings = ManagerSettings(include_paths(include_path), bool(include_defaults), metadata)
        self._index = self.settings.index()

    @property
    def all_tasks(self) -> list[str]:
        """Every name: tasks, groups and tags."""
        return sorted(self._index.names())

    @property
    def all_subtasks(self) -> list[str]:
        return self._index.task_names()

    @property
    def all_groups(self) -> list[str]:
        return self._index.group_names()

    @property
    def all_tags(self) -> list[str]:
        return self._index.tag_names()

    def load(self, task_list: str | Sequence[Any]) -> dict[str, Any]:
        """lm-eval's ``load``'s shape, ``{"tasks": ..., "groups": {}, "group_map": {}}``, keyed by the
        names asked for (a group stays one entry; evalflow expands it when it runs)."""
        return {"tasks": get_task_dict(task_list, self), "groups": {}, "group_map": {}}


@dataclass(frozen=True)
class TaskRef:
    """A task spec (a name, YAML path or config dict) with the manager that indexes it."""

    spec: Any
    manager: ManagerSettings = field(default_factory=ManagerSettings)


def get_task_dict(task_name_list: str | Sequence[Any], task_manager: Any = None) -> dict[str, Any]:
    """lm-eval's ``get_task_dict``: ``{name: TaskRef}`` for names, config dicts and lm-eval Task
    objects (kept as they are), each name checked against the manager's index."""
    specs = [task_name_list] if isinstance(task_name_list, str) else list(task_name_list)
    settings = manager_settings(task_manager)
    settings.check_names([s for s in specs if isinstance(s, str)])
    out: dict[str, Any] = {}
    for spec in specs:
        if isinstance(spec, (str, Mapping)):
            out[spec if isinstance(spec, str) else str(spec.get("task"))] = TaskRef(spec, settings)
        else:  # an lm-eval Task object, under its own name
            out[str(spec.config.task)] = spec
    return out


# lm-eval TaskManager's arguments evalflow reads off a task_manager (its own or lm-eval's), and what
# each becomes (docs/lm-eval-surface.md's TaskManager rows are written from this)
TASK_MANAGER_ARGS = {
    "include_path": "include_path=[...]: one path or a list; its folders join the task index, their code trusted",
    "include_defaults": "false: only the include_path tasks are known (another name refused before any model call)",
    "metadata": "the run's metadata setting, as --metadata gives it",
}


def manager_settings(task_manager: Any) -> ManagerSettings:
    """The settings of evalflow's manager or of lm-eval's own (its ``include_path`` and ``metadata``
    attributes; ``include_defaults`` as whether its index holds lm-eval's own task folder)."""
    if task_manager is None:
        return ManagerSettings()
    if isinstance(task_manager, TaskManager):
        return task_manager.settings
    index = getattr(task_manager, "task_index", None)
    if index is None:
        raise ConfigError(
            f"task_manager: {type(task_manager).__name__} is not a TaskManager (evalflow.lm_eval.tasks or "
            "lm_eval.tasks): pass TaskManager(include_path=..., include_defaults=..., metadata=...)."
        )
    defaults = str(Path(sys.modules[type(task_manager).__module__].__file__ or "").parent)  # lm_eval/tasks
    has_defaults = any(str(getattr(e, "yaml_path", "") or "").startswith(defaults) for e in index.values())
    return ManagerSettings(include_paths(task_manager.include_path), has_defaults, task_manager.metadata)


def task_items(task_dict: Mapping[Any, Any]) -> tuple[list[Any], ManagerSettings]:
    """The top-level task specs of a task dict lm-eval's ``evaluate`` takes — ``TaskManager.load``'s
    ``{"tasks", "groups", "group_map"}``, ``get_task_dict``'s legacy ``{name or group: task}``, or
    evalflow's — and the manager of its :class:`TaskRef` entries (one per dict)."""
    if "tasks" in task_dict and isinstance(task_dict["tasks"], Mapping):
        groups = dict(task_dict.get("groups") or {})
        children = {c for members in (task_dict.get("group_map") or {}).values() for c in members}
        in_groups = {t.task_name for g in groups.values() for t in g.get_all_tasks()}
        top = [g for name, g in groups.items() if name not in children]
        top += [t for name, t in task_dict["tasks"].items() if name not in in_groups]
    else:
        top = [key if not isinstance(key, str) else value for key, value in task_dict.items()]
    refs = [t for t in top if isinstance(t, TaskRef)]
    if any(r.manager != refs[0].manager for r in refs):
        raise ConfigError("evaluate: the task dict mixes tasks of several TaskManagers; load them with one.")
    return [r.spec if isinstance(r, TaskRef) else r for r in top], refs[0].manager if refs else ManagerSettings()
