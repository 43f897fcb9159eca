"""Where a task's data is read from: its dataset fields, or a data map entry, local paths made absolute.

A **data map** points hub datasets at local files, so tasks written against the hub (like
lm-eval's) run offline. It maps ``"<dataset_path>/<dataset_name>"`` (or just ``"<dataset_path>"``)
to ``load_dataset`` arguments that replace the task's::

    root: ../../../shared/data          # optional: base of relative paths (itself relative to the file)
    openai/gsm8k/main:
      path: json
      data_files: {train: gsm8k/train.jsonl, test: gsm8k/test.jsonl}

It comes from the run config key ``data_map`` (a mapping, or a path to a YAML/JSON file) or the
environment variable ``EVALFLOW_DATA_MAP`` (a path). Relative paths resolve against ``root``, which
resolves against the file's folder (or the working directory for an in-line mapping).
Relative ``data_files`` in a task YAML resolve against the YAML's folder when they exist there
(the built-in demo task ships its data beside its YAML), else against the working directory.

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

from evalflow.errors import DataError, TaskError
from evalflow.taskspec.format.spec import TaskConfig

DATA_MAP_ENV = "EVALFLOW_DATA_MAP"
# datasets' packaged builders: a dataset_path naming one reads local files given by data_files
PACKAGED_BUILDERS = frozenset(
    {
        "json",
        "csv",
        "parquet",
        "text",
        "arrow",
        "pandas",
        "xml",
        "sql",
        "webdataset",
        "imagefolder",
        "audiofolder",
        "videofolder",
    }
)
DataMapLike = Mapping[str, Any] | str | os.PathLike[str] | None


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


class DataMap(dict[str, dict[str, Any]]):
    """A data map as read: its entries (``load_dataset`` arguments, local paths absolute), and
    where it came from, so that an error about one of its files can name the map to fix. The run
    settings hold this object (settings.py reads the map once); reading it again returns it."""

    origin: str  # "the data map /abs/m.yaml", "the in-line data_map mapping", ...
    root: str | None  # its ``root:``, absolute; None when it has none
    base: str  # what its relative paths resolve against: the root, else the file's folder or cwd

    def describe(self) -> str:
        """The map and what its relative paths resolve against, as words for a message."""
        where = (
            f"whose root is {self.root}"
            if self.root is not None
            else f"which has no `root:` (its relative paths resolve against {self.base})"
        )
        return f"{self.origin}, {where}"


def read_data_map(data_map: DataMapLike = None) -> DataMap:
    """The data map from an in-line mapping, a file path, or ``$EVALFLOW_DATA_MAP``; empty if none."""
    if isinstance(data_map, DataMap):
        return data_map
    origin = "the in-line data_map mapping"
    if data_map is None:
        data_map = os.environ.get(DATA_MAP_ENV) or None
        if data_map is None:
            return _data_map({}, "no data map", None, Path.cwd())
        origin = f"${DATA_MAP_ENV}"
    if isinstance(data_map, (str, os.PathLike)):
        path = Path(data_map)
        raw = _read_map_file(path)
        base = path.resolve().parent
        origin = f"the data map {path.resolve()}" + (f" (from {origin})" if origin.startswith("$") else "")
    else:
        raw, base = dict(data_map), Path.cwd()
    root = raw.pop("root", None)
    if root is not None:
        if not isinstance(root, str):
            raise DataError(f"{origin}: 'root' must be a path string, got {root!r}")
        base = (base / os.path.expanduser(root)).resolve()
    out = {}
    for key, entry in raw.items():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("path"), str):
            raise DataError(
                f"data map entry '{key}' ({origin}) must be a mapping with a 'path' (a datasets builder "
                f"such as json, or a folder) and load_dataset arguments such as data_files; got {entry!r}"
            )
        out[str(key)] = _absolute_entry(dict(entry), base)
    return _data_map(out, origin, str(base) if root is not None else None, base)


def _data_map(entries: dict[str, dict[str, Any]], origin: str, root: str | None, base: Path) -> DataMap:
    made = DataMap(entries)
    made.origin, made.root, made.base = origin, root, str(base)
    return made


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
        kwargs["data_files"] = _map_paths(kwargs["data_files"], lambda p: _near_yaml(p, base))
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


def _absolute_entry(entry: dict[str, Any], base: Path) -> dict[str, Any]:
    def absolute(p: str) -> str:
        return p if os.path.isabs(p) or "://" in p else str(base / os.path.expanduser(p))

    if "data_files" in entry:
        entry["data_files"] = _map_paths(entry["data_files"], absolute)
    if "data_dir" in entry:
        entry["data_dir"] = absolute(str(entry["data_dir"]))
    if entry["path"] not in PACKAGED_BUILDERS and (base / entry["path"]).exists():
        entry["path"] = str((base / entry["path"]).resolve())
    return entry


def _map_paths(data_files: Any, fn: Any) -> Any:
    if isinstance(data_files, Mapping):
        return {k: _map_paths(v, fn) for k, v in data_files.items()}
    if isinstance(data_files, Sequence) and not isinstance(data_files, str):  # also OmegaConf lists
        return [fn(str(p)) for p in data_files]
    return fn(str(data_files))


def _near_yaml(path: str, base: Path) -> str:
    if os.path.isabs(path) or "://" in path:
        return path
    beside = base / path
    return str(beside.resolve()) if beside.exists() or glob.glob(str(beside)) else path


def _read_map_file(path: Path) -> dict[str, Any]:
    """A data-map file; ``${...}`` interpolations (``${evalflow.shared_data:}`` in the shipped
    conf/data_maps/shared.yaml, which is also a Hydra config group) resolve as Hydra would."""
    if not path.is_file():
        raise DataError(
            f"data map file {str(path)!r} does not exist (from the data_map setting or ${DATA_MAP_ENV}). "
            "Fix the path, or unset it to load datasets from the hub."
        )
    import yaml  # JSON is YAML, so one parser reads both

    text = path.read_text(encoding="utf-8")
    try:
        raw = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml: 10x faster
    except yaml.YAMLError as exc:
        raise DataError(f"data map file {str(path)!r} is not valid YAML/JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise DataError(f"data map file {str(path)!r} must hold a mapping of dataset ids to entries")
    return _resolve_interpolations(raw, path) if "${" in text else raw


def _resolve_interpolations(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from evalflow.config.resolvers import register_resolvers  # the resolvers conf/ files use

    register_resolvers()
    try:
        resolved = OmegaConf.to_container(OmegaConf.create(raw), resolve=True)
    except OmegaConfBaseException as exc:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, DataError):  # a resolver's own paragraph (shared_data)
            cause = cause.__context__
        if cause is not None:
            raise cause from None
        raise DataError(f"data map file {str(path)!r}: an interpolation does not resolve: {exc}") from None
    return dict(resolved)  # type: ignore[arg-type]
