"""The ``data_map`` setting: which map file it names, and the map as read.

A **data map** points hub datasets at local files, so tasks written against the hub (like
lm-eval's) run offline. It maps ``"<dataset_path>/<dataset_name>"`` (or just ``"<dataset_path>"``)
to ``load_dataset`` arguments that replace the task's::

    root: ../../../shared/data          # optional: base of relative paths (itself relative to the file)
    openai/gsm8k/main:
      path: json
      data_files: {train: gsm8k/train.jsonl, test: gsm8k/test.jsonl}

It comes from the run config key ``data_map`` (a map's name in conf/data_maps/, a mapping, or a
path to a YAML/JSON file) or the environment variable ``EVALFLOW_DATA_MAP`` (a path). Relative
paths resolve against ``root``, which resolves against the file's folder (or the working directory
for an in-line mapping). The map is read here, with the run's settings, so a missing or malformed
map fails before any task loads; :mod:`evalflow.taskspec.data.datamap` looks a task up in it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalflow.config.packaged import conf_dir
from evalflow.errors import ConfigError, DataError

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


class DataMap(dict[str, dict[str, Any]]):
    """A data map as read: its entries (``load_dataset`` arguments, local paths absolute), and
    where it came from, so that an error about one of its files can name the map to fix. The run
    settings hold this object (:func:`setting_map` reads the map once); reading it again returns it."""

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


def data_map_file(value: Any) -> Path | None:
    """The map file a ``data_map`` value names: a map in conf/data_maps/ by name, else a path;
    ``$EVALFLOW_DATA_MAP`` when the setting is unset. None for an in-line mapping or no map."""
    if value is None and os.environ.get(DATA_MAP_ENV):
        value = os.environ[DATA_MAP_ENV]
    if value is None or isinstance(value, Mapping):
        return None
    text = str(value)
    maps = conf_dir() / "data_maps"
    named = maps / f"{text}.yaml"
    if "/" not in text and os.sep not in text and named.is_file():
        return named
    path = Path(text).expanduser()
    if not path.is_file():
        names = sorted(p.stem for p in maps.glob("*.yaml"))
        raise ConfigError(
            f"data_map={value}: neither a map in conf/data_maps/ ({', '.join(names)}) nor an existing file; "
            "give a map's name (data_map=shared), the path of a YAML/JSON map file, or an in-line mapping"
        )
    return path.resolve()


def setting_map(value: Any) -> Mapping[str, Any] | None:
    """The ``data_map`` setting's map: an in-line mapping as given, else the named file as read
    (relative paths made absolute against its folder or ``root``); None when no map is set."""
    if isinstance(value, Mapping):
        return value
    path = data_map_file(value)
    return None if path is None else read_data_map(path)


def setting_file(value: Any) -> str | None:
    """The map file the ``data_map`` setting came from (recorded in the manifest and the snapshot)."""
    path = None if isinstance(value, Mapping) else data_map_file(value)
    return str(path) if path else None


def _absolute_entry(entry: dict[str, Any], base: Path) -> dict[str, Any]:
    def absolute(p: str) -> str:
        return p if os.path.isabs(p) or "://" in p else str(base / os.path.expanduser(p))

    if "data_files" in entry:
        entry["data_files"] = map_paths(entry["data_files"], absolute)
    if "data_dir" in entry:
        entry["data_dir"] = absolute(str(entry["data_dir"]))
    if entry["path"] not in PACKAGED_BUILDERS and (base / entry["path"]).exists():
        entry["path"] = str((base / entry["path"]).resolve())
    return entry


def map_paths(data_files: Any, fn: Any) -> Any:
    if isinstance(data_files, Mapping):
        return {k: map_paths(v, fn) for k, v in data_files.items()}
    if isinstance(data_files, Sequence) and not isinstance(data_files, str):  # also OmegaConf lists
        return [fn(str(p)) for p in data_files]
    return fn(str(data_files))


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

    from evalflow.config.omegaconf_dicts import to_dict
    from evalflow.config.resolvers import register_resolvers  # the resolvers conf/ files use

    register_resolvers()
    try:
        resolved = to_dict(OmegaConf.create(raw), resolve=True)
    except OmegaConfBaseException as exc:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, DataError):  # a resolver's own paragraph (shared_data)
            cause = cause.__context__
        if cause is not None:
            raise cause from None
        raise DataError(f"data map file {str(path)!r}: an interpolation does not resolve: {exc}") from None
    return resolved
