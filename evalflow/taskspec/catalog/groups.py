"""Groups and tags, and how a request (``mmlu,hellaswag``) expands into leaf tasks.

lm-eval 0.4.13 semantics (``lm_eval/tasks/_factory.py``, ``lm_eval/config/group.py``):

* A group YAML has ``group:`` and a ``task:`` list. Its keys ``group``, ``group_alias``, ``task``,
  ``aggregate_metric_list`` and ``metadata`` describe the group; every other key is an override
  applied to each member task. Overrides passed down from a parent group win over a group's own.
* A member is a name (task, group or tag), a dict ``{task: name, ...overrides}`` (the member's keys
  win over the group's), a dict ``{group: name, task: [...]}`` defining an inline subgroup named
  ``parent::name``, or a dict ``{task: new_name, dataset_path: ...}`` defining an inline task named
  ``group::new_name``.
* A tag is a name shared by tasks through their ``tag:`` key; it expands to its tasks sorted by name.

Where lm-eval misbehaves, evalflow refuses or does the evident thing instead, and says so:
a task reached twice along different paths (a group and a tag, two groups, a name requested twice)
is an error, while a name listed twice in one group's list is used once, as lm-eval does; group
cycles are an error (lm-eval recurses forever); a dict member naming a tag keeps each task's name
(lm-eval renames them all to the tag); a dict member naming a *task* under ``group:`` is an inline
subgroup (lm-eval would build the task with a list as its name); ``include:`` inside an inline
member is resolved relative to the group file (0.4.13 rejects it; older versions and the shipped
flan groups use it); and a ``group:`` file whose ``task:`` is a single name (lm-eval's old task
format, which 0.4.13 reads as a group with no members) is refused with the fix.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from evalflow.errors import TaskError, UnsafeCodeError, closest
from evalflow.taskspec.catalog.selection import GroupSpec, IndexEntry, Selection, kind_of
from evalflow.taskspec.format.installed import package_module
from evalflow.taskspec.format.loader import DROPPED_TASK_KEYS, load_yaml, task_from_dict, with_includes
from evalflow.taskspec.format.spec import TASK_FIELDS, FunctionRef, TaskConfig, check_keys
from evalflow.taskspec.format.taskcode import function_refs

log = logging.getLogger(__name__)

GROUP_FIELDS = ("group", "group_alias", "task", "aggregate_metric_list", "metadata")
AGG_FIELDS = ("metric", "filter_list", "aggregation", "weight_by_size")
# Keys a group file may hold: its own, task overrides, and `tag` (a group's tag labels the group
# only; lm-eval drops it before building member tasks).
_GROUP_FILE_KEYS = GROUP_FIELDS + TASK_FIELDS + DROPPED_TASK_KEYS + ("tag",)


class Registry(Protocol):
    def entry(self, name: str) -> IndexEntry | None: ...

    def names(self) -> Iterable[str]: ...


def task_list_item(cfg: Mapping[str, Any], item: int, source: str) -> dict[str, Any]:
    """Task ``item`` of a ``task_list`` file: the file's shared keys, then the item's keys."""
    items = cfg.get("task_list")
    if not isinstance(items, list) or not 0 <= item < len(items) or not isinstance(items[item], Mapping):
        raise TaskError(f"{source}: task_list entry {item} is gone; the file changed, run again.")
    base = {k: v for k, v in cfg.items() if k != "task_list"}
    return {**base, **items[item]}


def entry_config(entry: IndexEntry) -> dict[str, Any]:
    """The full merged config (``!function`` as FunctionRef) of an indexed task or group."""
    cfg = load_yaml(entry.path)
    return task_list_item(cfg, entry.item, entry.path) if entry.item is not None else cfg


def group_spec(name: str, raw: Mapping[str, Any], members: tuple[str, ...], source: str) -> GroupSpec:
    """Validate a group's own fields (lm-eval's GroupConfig / AggMetricConfig) into a GroupSpec."""
    alias = raw.get("group_alias")
    if alias is not None and not isinstance(alias, str):
        raise TaskError(f"{source}: `group_alias:` of group '{name}' must be a string, got {alias!r}.")
    metadata = raw.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        metadata = {"_metadata": metadata}
    aggs = raw.get("aggregate_metric_list")
    if aggs is not None:
        items = [aggs] if isinstance(aggs, Mapping) else aggs
        if not isinstance(items, list):
            raise TaskError(f"{source}: `aggregate_metric_list:` of '{name}' must be a list of mappings.")
        aggs = tuple(_aggregate(item, name, source) for item in items)
    return GroupSpec(name, members, aggs, alias, metadata, source)


def _aggregate(item: Any, group: str, source: str) -> dict[str, Any]:
    if not isinstance(item, Mapping) or not isinstance(item.get("metric"), (str, FunctionRef)):
        raise TaskError(
            f"{source}: each aggregate_metric_list entry of group '{group}' must be a mapping with "
            f"`metric: name`, got {item!r}."
        )
    for key in item:
        if key not in AGG_FIELDS:
            raise TaskError(
                f"{source}: unknown aggregate_metric_list key '{key}' in group '{group}'; "
                f"{closest(str(key), AGG_FIELDS)}"
            )
    out = {"metric": item["metric"], "aggregation": item.get("aggregation", "mean")}
    if out["aggregation"] != "mean" and not isinstance(out["aggregation"], FunctionRef):
        raise TaskError(
            f"{source}: group '{group}' aggregates '{item['metric']}' with "
            f"'{out['aggregation']}'; lm-eval defines only `mean` (or a `!function`)."
        )
    weight = item.get("weight_by_size", True)
    if not isinstance(weight, bool):
        raise TaskError(f"{source}: `weight_by_size:` in group '{group}' must be true or false.")
    out["weight_by_size"] = weight
    filters = item.get("filter_list")
    out["filter_list"] = [filters] if isinstance(filters, str) else filters
    return out


class Expander:
    """Turns requested names into a :class:`Selection`, building each task exactly once."""

    def __init__(self, registry: Registry, *, trusted_root: str, trust: bool) -> None:
        self.registry = registry
        self.trusted_root = os.path.realpath(trusted_root)
        self.trust = trust
        self.tasks: list[TaskConfig] = []
        self.groups: list[GroupSpec | None] = []
        self._reached: dict[str, str] = {}  # task name -> how it was reached, for errors

    def selection(self) -> Selection:
        return Selection(tuple(self.tasks), tuple(g for g in self.groups if g is not None))

    def add_entry(self, entry: IndexEntry) -> None:
        """A requested index entry (task, group or tag)."""
        if entry.kind == "tag":
            self._tag(entry, {}, f"tag '{entry.name}'")
        elif entry.kind == "group":
            self._group(entry.name, entry_config(entry), {}, entry.path, ())
        else:
            self._indexed_task(entry, {}, f"the request '{entry.name}'")

    def add_file(self, path: str) -> None:
        """A requested YAML file, which may define a task, a group or a task_list."""
        cfg = load_yaml(path)
        kind = kind_of(cfg)
        if kind == "group":
            self._group(cfg["group"], cfg, {}, path, ())
        elif kind in ("task", "python"):
            self._task(cfg, path, f"the file {path}")
        elif kind == "task_list":
            for i in range(len(cfg["task_list"])):
                self._task(task_list_item(cfg, i, path), f"{path} (task_list entry {i})", f"the file {path}")
        else:
            raise TaskError(
                f"{path} defines no task: it has neither `task:`, `group:` nor `task_list:` (it may "
                "be a template meant to be included). Request a file that defines a task or group."
            )

    # ------------------------------------------------------------------ leaves

    def _indexed_task(self, entry: IndexEntry, overrides: Mapping[str, Any], via: str) -> str:
        return self._task({**entry_config(entry), **overrides}, entry.path, via)

    def _task(self, cfg: Mapping[str, Any], source: str, via: str) -> str:
        self._check_trust(cfg, source, f"task '{cfg.get('task')}'")
        task = task_from_dict(cfg, source)
        if task.task in self._reached:
            raise TaskError(
                f"task '{task.task}' is selected twice: through {self._reached[task.task]} and "
                f"through {via}. Its results would be computed and aggregated twice; request it "
                "once, or run the overlapping groups/tags in separate runs."
            )
        self._reached[task.task] = via
        self.tasks.append(task)
        return task.task

    def _tag(self, entry: IndexEntry, overrides: Mapping[str, Any], via: str) -> list[str]:
        names = []
        for name in entry.members:
            member = self.registry.entry(name)
            if member is None or member.kind != "task":
                log.warning("tag '%s' lists task '%s', which is not indexed; skipping it", entry.name, name)
                continue
            names.append(self._indexed_task(member, {**overrides, "task": name}, via))
        return names

    def _check_trust(self, cfg: Mapping[str, Any], source: str, what: str) -> None:
        if self.trust:
            return
        for ref in function_refs(cfg):
            # A module of an installed distribution's package (lm-eval's task library) is trusted
            # like any installed dependency: `import lm_eval` would run it too (taskspec/format/installed.py).
            if not _inside(ref.module_path, self.trusted_root) and package_module(ref.module_path) is None:
                raise UnsafeCodeError(
                    f"{what} ({source}) uses task code `{ref.attr}` from {ref.module_path}, which "
                    f"is outside evalflow's built-in tasks folder ({self.trusted_root}) and not part "
                    "of an installed Python package. Task code runs with your permissions, so "
                    "evalflow runs it only when you allow it: pass trust_task_code=true if you trust "
                    "this folder."
                )

    # ------------------------------------------------------------------ groups

    def _group(
        self,
        name: Any,
        raw: Mapping[str, Any],
        overrides: Mapping[str, Any],
        source: str,
        chain: tuple[str, ...],
    ) -> str:
        """Build group ``name`` from its config; ``chain`` is the groups above it (for cycles)."""
        if not isinstance(name, str) or not name:
            raise TaskError(f"{source}: `group:` must be the group's name (a string), got {name!r}.")
        if name in chain:
            cycle = " -> ".join(chain + (name,))
            raise TaskError(f"{source}: group cycle {cycle}; a group cannot contain itself.")
        check_keys(raw, source, allowed=_GROUP_FILE_KEYS)
        members = _member_list(name, raw.get("task"), source)
        self._check_trust({"agg": raw.get("aggregate_metric_list")}, source, f"group '{name}'")
        own = {k: v for k, v in raw.items() if k not in GROUP_FIELDS and k != "tag"}
        passed = {**own, **overrides}  # a parent's overrides win over the group's own
        slot = len(self.groups)
        self.groups.append(None)  # reserved: a group is listed before its subgroups
        via = "group " + " > ".join(chain + (name,))
        children: list[str] = []
        listed: set[str] = set()
        for item in members:
            if isinstance(item, str) and item in listed:
                log.warning("%s: group '%s' lists '%s' twice; using it once (as lm-eval)", source, name, item)
                continue
            listed.add(item if isinstance(item, str) else "")
            children += self._member(item, name, passed, source, chain + (name,), via)
        self.groups[slot] = group_spec(name, raw, tuple(children), source)
        return name

    def _member(
        self,
        item: Any,
        group: str,
        overrides: Mapping[str, Any],
        source: str,
        chain: tuple[str, ...],
        via: str,
    ) -> list[str]:
        if isinstance(item, Mapping) and "include" in item:
            item = with_includes(item, source)
        if isinstance(item, Mapping) and "group" in item:
            return [self._group_member(item, group, overrides, source, chain)]
        if isinstance(item, str):
            base, item_overrides = item, dict(overrides)
        elif isinstance(item, Mapping) and isinstance(item.get("task"), str):
            base, item_overrides = item["task"], {**overrides, **item}
        else:
            raise TaskError(
                f"{source}: member {item!r} of group '{group}' must be a name, a mapping with "
                "`task: name`, or a mapping with `group: name` and a `task:` list."
            )
        entry = self.registry.entry(base)
        if entry is None:
            return [self._inline_task(item, base, group, item_overrides, source, via)]
        if entry.kind == "group":
            return [self._group(entry.name, entry_config(entry), item_overrides, entry.path, chain)]
        if entry.kind == "tag":
            return self._tag(entry, {k: v for k, v in item_overrides.items() if k != "task"}, via)
        return [self._indexed_task(entry, {**item_overrides, "task": base}, via)]

    def _group_member(
        self,
        item: Mapping[str, Any],
        group: str,
        overrides: Mapping[str, Any],
        source: str,
        chain: tuple[str, ...],
    ) -> str:
        name = item["group"]
        entry = self.registry.entry(name) if isinstance(name, str) else None
        if entry is not None and entry.kind == "group":  # a registered group; the item's keys win
            return self._group(name, {**entry_config(entry), **item}, overrides, entry.path, chain)
        inline = f"{group}::{name}"
        return self._group(inline, {**item, "group": inline}, overrides, source, chain)

    def _inline_task(self, item: Any, base: str, group: str, cfg: Mapping[str, Any], source: str, via: str) -> str:
        if isinstance(item, str) or not ("dataset_path" in cfg or "custom_dataset" in cfg):
            raise TaskError(
                f"{source}: member '{base}' of group '{group}' is not a known task, group or tag, "
                f"and not an inline task definition (it has no dataset_path); "
                f"{closest(base, self.registry.names())}"
            )
        return self._task({**cfg, "task": f"{group}::{base}"}, f"{source} (inline in group '{group}')", via)


def _member_list(name: str, members: Any, source: str) -> list[Any]:
    if isinstance(members, str):
        raise TaskError(
            f"{source}: `group: {name}` with a single `task: {members}` is lm-eval's old task "
            f"format; lm-eval 0.4.13 reads it as a group named '{name}' with no members. To make "
            f"'{members}' a task labelled '{name}', write `tag: {name}` instead of `group:`."
        )
    if not isinstance(members, list) or not members:
        raise TaskError(f"{source}: group '{name}' needs a non-empty `task:` list of member tasks, groups or tags.")
    return members


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def expand(
    registry: Registry,
    requested: Iterable[str],
    *,
    trusted_root: str,
    trust: bool,
    path_of: Callable[[str], str | None],
) -> Selection:
    """Expand requested names (or YAML paths, via ``path_of``) into a :class:`Selection`."""
    expander = Expander(registry, trusted_root=trusted_root, trust=trust)
    for name in requested:
        entry = registry.entry(name)
        if entry is not None:
            expander.add_entry(entry)
            continue
        path = path_of(name)
        if path is None:
            raise TaskError(
                f"unknown task, group or tag '{name}'; {closest(name, registry.names())} "
                "`python -m evalflow ls` lists them; add folders with include_path=[...], or pass "
                "the path of a task YAML."
            )
        expander.add_file(path)
    return expander.selection()
