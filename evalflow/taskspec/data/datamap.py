"""Where a task's data is read from: its dataset fields, or a data map entry, local paths made absolute.

A **data map** (:mod:`evalflow.config.data_map`, read with the run's settings) points hub datasets
at local files; a task's entry in it replaces the task's own dataset fields. Relative ``data_files``
in a task YAML resolve against the YAML's folder when they exist there (the built-in demo task ships
its data beside its YAML), else against the working directory.

Nothing here reads a row or imports ``datasets`` (:mod:`evalflow.taskspec.data.docsets` does), so the
files can be checked when tasks are selected, before any model call.

    source = data_source(task, "conf/data_maps/shared.yaml")   # DataSource(path="json", files=...)
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalflow.config.data_map import PACKAGED_BUILDERS, DataMapLike, map_paths, read_data_map
from evalflow.errors import DataError, TaskError
from evalflow.taskspec.format.spec import TaskConfig


@dataclass(frozen=True)
class DataSource:
    """The arguments ``datasets.load_dataset`` is called with, local paths made absolute."""

    path: str
    name: str | None
    kwargs: Mapping[str, Any]
    # local files per data_files key ("" for a local folder or file); empty for hub data
    files: Mapping[str, tuple[str, ...]]
    mapped_from: str | None = None  # the data-map key used, for messages
    map_origin: str | None = None  # which map and root that key is in (DataMap.describe), for messages

    @property
    def is_local(self) -> bool:
        return bool(self.files)

    def describe(self) -> str:
        """``'json' via entry 'x' of the data map ...``: where the data comes from, for a message."""
        what = f"'{self.path}'" + (f" (name '{self.name}')" if self.name else "")
        return what + (f" via {self.map_origin}" if self.map_origin else "")


def data_source(task: TaskConfig, data_map: DataMapLike = None) -> DataSource:
    """Where the task's data is read from: its data-map entry if any, else its own dataset fields."""
    if task.dataset_path is None:
        raise TaskError(
            f"task '{task.task}' ({task.source}) has no dataset_path; set it to a hub dataset id, a "
            "datasets builder such as json (with dataset_kwargs.data_files), or a local folder."
        )
    entries = read_data_map(data_map)
    keys = [f"{task.dataset_path}/{task.dataset_name}"] if task.dataset_name else []
    for key in keys + [task.dataset_path]:
        if key in entries:
            entry = dict(entries[key])
            path, name = entry.pop("path"), entry.pop("name", None)
            where = f"entry '{key}' of {entries.describe()}"
            fix = (
                f"Fix that entry's data_files (or the map's root), point data_map at another map, or "
                f"unset data_map to load '{task.dataset_path}' from the hub."
            )
            files = _local_files(path, entry, f"task '{task.task}' ({task.source})", f"It comes from {where}. {fix}")
            return DataSource(path, name, entry, files, mapped_from=key, map_origin=where)
    kwargs = dict(task.dataset_kwargs or {})
    kwargs.pop("trust_remote_code", None)  # as lm-eval does with datasets >= 4
    base = Path(task.source).parent if task.source and os.path.isfile(task.source) else None
    if base is not None and "data_files" in kwargs:
        kwargs["data_files"] = map_paths(kwargs["data_files"], lambda p: _near_yaml(p, base))
    path = task.dataset_path
    if base is not None and not os.path.isabs(path) and (base / path).exists():
        path = str((base / path).resolve())
    fix = (
        "Fix the path in the task's dataset_kwargs (or map the dataset with a data map); relative paths "
        "resolve against the task YAML's folder, else the working directory."
    )
    return DataSource(
        path, task.dataset_name, kwargs, _local_files(path, kwargs, f"task '{task.task}' ({task.source})", fix)
    )


def check_data_files(tasks: Sequence[TaskConfig], data_map: DataMapLike = None) -> None:
    """Every local data file of ``tasks`` exists (no file is read, ``datasets`` is not imported).
    Checked when tasks are selected: the load_docs stage of a later task would otherwise find its
    file missing only after the model answered every earlier task."""
    for task in tasks:
        if task.custom_dataset is None:
            data_source(task, data_map)


def _local_files(path: str, kwargs: Mapping[str, Any], task: str = "", fix: str = "") -> dict[str, tuple[str, ...]]:
    """The local files data is read from (``{}`` for a hub dataset), globs expanded; a missing
    one is a DataError naming ``task`` and ending in ``fix`` (where the path came from)."""
    if path not in PACKAGED_BUILDERS:
        if os.path.exists(path):
            return {"": (path,)}
        return {}
    data_files = kwargs.get("data_files")
    if data_files is None and kwargs.get("data_dir"):
        return {"": (str(kwargs["data_dir"]),)}
    groups = data_files if isinstance(data_files, Mapping) else {"": data_files}
    if "://" in repr(groups):  # remote files: identified by loading, like hub data
        return {}
    out = {}
    for key, value in groups.items():
        patterns = [value] if isinstance(value, (str, os.PathLike)) else list(value or [])
        found: list[str] = []
        for pattern in patterns:
            matches = sorted(glob.glob(str(pattern))) if glob.has_magic(str(pattern)) else [str(pattern)]
            if not matches or not all(os.path.exists(m) for m in matches):
                what = "matches no file" if glob.has_magic(str(pattern)) else "does not exist"
                raise DataError(
                    f"{task + ': ' if task else ''}data file {str(pattern)!r} (data_files "
                    f"'{key or 'all'}') {what}. {fix}".strip()
                )
            found += matches
        out[str(key)] = tuple(found)
    return out


def _near_yaml(path: str, base: Path) -> str:
    if os.path.isabs(path) or "://" in path:
        return path
    beside = base / path
    return str(beside.resolve()) if beside.exists() or glob.glob(str(beside)) else path
