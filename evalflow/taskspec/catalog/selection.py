"""The nouns the task index and the group expansion share: what a name is, and what a request selects.

They live here, not in ``index`` or ``groups``, so that imports point one way:
``index`` → ``groups`` → ``selection`` (and ``index`` → ``selection``); neither module needs
the other's internals to describe its result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evalflow.taskspec.format.spec import TaskConfig

__all__ = ["GroupSpec", "IndexEntry", "Selection", "kind_of"]


@dataclass(frozen=True)
class IndexEntry:
    """One name in the task index: where it is defined and what kind of thing it is."""

    name: str
    kind: str  # "task" | "group" | "tag"
    path: str = ""  # the defining YAML (tags: "")
    item: int | None = None  # index into the file's `task_list`, for tasks defined there
    python: bool = False  # an lm-eval Python task (`class:`)
    members: tuple[str, ...] = ()  # tags: their task names, sorted


@dataclass(frozen=True)
class GroupSpec:
    """A resolved group: its members' names in order and how their metrics aggregate."""

    name: str
    members: tuple[str, ...]  # task or group names, in order
    # lm-eval's AggMetricConfig: metric, aggregation ("mean"), weight_by_size (True), filter_list
    aggregate_metric_list: tuple[Mapping[str, Any], ...] | None
    group_alias: str | None = None
    metadata: Mapping[str, Any] | None = None
    source: str = ""


@dataclass(frozen=True)
class Selection:
    """What a request selects: leaf tasks (group overrides applied) and every group involved."""

    tasks: tuple[TaskConfig, ...]
    groups: tuple[GroupSpec, ...]


def kind_of(cfg: Mapping[str, Any]) -> str | None:
    """lm-eval's classification of a merged YAML: ``class`` > ``group`` > ``task`` (> task_list)."""
    if "class" in cfg:
        return "python"
    if "group" in cfg:
        return "group"
    if "task" in cfg:
        return "task"
    if isinstance(cfg.get("task_list"), list):
        return "task_list"
    return None
