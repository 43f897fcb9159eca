"""lm-eval's ways of naming a task in Python, as evalflow task YAMLs: ``simple_evaluate(tasks=[...])``
and ``evaluate(lm, task_dict)`` take names, config dicts and lm-eval ``Task``/``Group`` objects
(``lm_eval.tasks.TaskManager.load`` and ``get_task_dict`` make them).

A name stays a name. A config dict is the whole task, as lm-eval 0.4.13 reads one
(``TaskManager._load_spec``: an inline entry, never laid over an indexed task of the same name,
which it replaces; a group dict names its members). A ``Task`` object is run by
its config (``task.config``), written as task YAML content: so what is evaluated is what the object
says, including edits made with ``set_config``, and its cache keys are those of the same YAML
written by hand. A ``Group`` is a group YAML over its members, written the same way.

A function in a config (``process_docs``, a metric) becomes ``!function`` of the ``.py`` file that
defines it, reached through a link in the written folder, so its key is the file's source as a
``!function`` in a hand-written YAML is. A function with no such file (a notebook cell, a lambda, a
nested function) is refused: its code could not be keyed, and a changed function would be served
stale answers.

:func:`task_docs` is pure (names and YAML documents); :func:`write_task_docs` writes them.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evalflow.errors import ConfigError


@dataclass(frozen=True)
class TaskDocs:
    """The names a run selects and the YAML documents (file stem → config) to write for them."""

    names: tuple[str, ...]
    docs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    links: Mapping[str, str] = field(default_factory=dict)  # link name → folder of a function's .py file


@dataclass(frozen=True)
class _Function:
    """A ``!function`` reference in a written YAML: link folder, module stem, attribute."""

    spec: str


def task_docs(items: list[Any]) -> TaskDocs:
    """The run's names and YAML documents for lm-eval's task specs."""
    names: list[str] = []
    docs: dict[str, Mapping[str, Any]] = {}
    links: dict[str, str] = {}
    for item in items:
        if isinstance(item, str):
            names.append(item)
        elif isinstance(item, Mapping):
            names.append(_add_dict(item, docs, links))
        elif _is_lm_eval(item, "Group"):
            names.append(_add_group(item, docs, links))
        elif _is_lm_eval(item, "Task"):
            names.append(_add_task(item, docs, links))
        else:
            raise ConfigError(
                f"tasks: {item!r} ({type(item).__name__}) is not a task lm-eval takes: give a task, group or "
                "tag name, a YAML path, a config dict with a `task` key, or an lm-eval Task or Group object."
            )
    return TaskDocs(tuple(names), docs, links)


def _is_lm_eval(obj: Any, base: str) -> bool:
    """Whether ``obj`` is an instance of lm-eval's ``lm_eval.api.{task,group}.<base>`` (by its MRO:
    lm-eval need not be imported here unless the user's objects came from it)."""
    return any(k.__module__.startswith("lm_eval.api.") and k.__name__ == base for k in type(obj).__mro__)


def _add_dict(spec: Mapping[str, Any], docs: dict[str, Any], links: dict[str, str]) -> str:
    name = spec.get("task") if "group" not in spec else spec.get("group")
    if not isinstance(name, str) or not name:
        raise ConfigError(
            f"tasks: the config dict {dict(spec)!r} names no task: give it a `task` key (its name; lm-eval: "
            "'Invalid config dict: must contain 'task' or 'group' key')."
        )
    docs[_stem(name, docs)] = _plain(dict(spec), links, f"task {name}")
    return name


def _add_task(task: Any, docs: dict[str, Any], links: dict[str, str]) -> str:
    config = task.config.to_dict(keep_callable=True)
    name = str(config["task"])
    docs[_stem(name, docs)] = _plain(config, links, f"task {name}")
    return name


def _add_group(group: Any, docs: dict[str, Any], links: dict[str, str]) -> str:
    """A group YAML over its members (each written too): lm-eval's ``Group`` holds its name, alias,
    ``aggregate_metric_list`` (dataclasses) and metadata as attributes."""
    members = [_add_group(c, docs, links) if _is_lm_eval(c, "Group") else _add_task(c, docs, links) for c in group]
    aggregate = [dataclasses.asdict(a) for a in group.aggregate_metric_list or []]
    doc = {
        "group": str(group.name),
        **({"group_alias": group.alias} if group.alias and group.alias != group.name else {}),
        "task": members,
        **({"aggregate_metric_list": aggregate} if aggregate else {}),
        **({"metadata": dict(group.metadata)} if group.metadata else {}),
    }
    docs[_stem(str(group.name), docs)] = _plain(doc, links, f"group {group.name}")
    return str(group.name)


def _stem(name: str, docs: Mapping[str, Any]) -> str:
    """A file stem for ``name``, unique in this run's folder."""
    stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in name) or "task"
    return stem if stem not in docs else f"{stem}_{len(docs)}"


def _plain(value: Any, links: dict[str, str], where: str) -> Any:
    """``value`` as YAML data: a function as a :class:`_Function` reference (its folder linked)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v, links, where) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, links, where) for v in value]
    if callable(value) and not isinstance(value, type):
        return _function(value, links, where)
    return value


def _function(fn: Callable[..., Any], links: dict[str, str], where: str) -> _Function:
    """The ``!function`` spec of ``fn``, its module's folder added to ``links``."""
    qualname = getattr(fn, "__qualname__", "")
    try:
        source = inspect.getsourcefile(fn)
    except TypeError:
        source = None
    if not qualname or "<" in qualname or source is None or not source.endswith(".py") or not os.path.isfile(source):
        raise ConfigError(
            f"tasks: {where} holds the function {fn!r}, which is not a module-level function of a .py file "
            f"(its file: {source or 'none'}). evalflow keys a task's code by its source file, so a function "
            "from a notebook cell, a lambda or a nested function cannot be keyed (a changed one would be "
            "served stale answers): define it in a .py file next to your script, import it, and pass that."
        )
    folder = os.path.dirname(os.path.realpath(source))
    link = next((k for k, v in links.items() if v == folder), f"_code{len(links)}")
    links[link] = folder
    return _Function(f"{link}.{Path(source).stem}.{qualname}")


class _Dumper(yaml.SafeDumper):
    """Safe YAML plus ``!function``."""


_Dumper.add_representer(_Function, lambda dumper, f: dumper.represent_scalar("!function", f.spec))


def write_task_docs(docs: TaskDocs, folder: Path) -> Path:
    """Write the documents into ``folder``/tasks (returned: the run's include folder) and the links to
    the functions' folders into ``folder``, outside what the index scans (``!function`` looks up a
    module's path in the YAML's folder, then in each parent)."""
    tasks = folder / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    for link, target in docs.links.items():
        (folder / link).symlink_to(target, target_is_directory=True)
    for stem, doc in docs.docs.items():
        text = yaml.dump(dict(doc), Dumper=_Dumper, sort_keys=False, allow_unicode=True)
        (tasks / f"{stem}.yaml").write_text(text, encoding="utf-8")
    return tasks
