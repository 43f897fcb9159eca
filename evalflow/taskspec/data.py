"""A task's documents, loaded with the ``datasets`` library as lm-eval loads them, and their identity.

``load_docset`` calls ``datasets.load_dataset(dataset_path, dataset_name, **dataset_kwargs)``,
takes the evaluated split (test, else validation) and the few-shot pool (``fewshot_config.split``
/ ``fewshot_split``, else ``fewshot_config.samples``, else training, validation, test), applies
``process_docs`` and turns the rows into plain JSON dicts.

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

``data_fingerprint`` is the identity of the data, not of its path: the xxhash of local files'
bytes (without importing ``datasets``, so a cached re-run stays fast), or the ``datasets``
library's fingerprint of every split of a hub dataset; for an image task (``doc_to_image``), also
the bytes of the files its rows name by path (:mod:`evalflow.taskspec.image_files`, which reads the
rows to find them).

    docs = load_docset(task, "conf/data_maps/shared.yaml")
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from evalflow.cache.fingerprint import file_fingerprint, fingerprint
from evalflow.errors import DataError, TaskError
from evalflow.records import DocSet
from evalflow.taskspec.image_files import files_identity, named_files
from evalflow.taskspec.images import is_image_value, plain_image
from evalflow.taskspec.jsonl import read_jsonl_splits
from evalflow.taskspec.samplers import fewshot_options, fewshot_source
from evalflow.taskspec.spec import TaskConfig
from evalflow.taskspec.templates import call_function, call_task_function

DATA_MAP_ENV = "EVALFLOW_DATA_MAP"
# datasets' packaged builders: a dataset_path naming one reads local files given by data_files
PACKAGED_BUILDERS = frozenset(
    {"json", "csv", "parquet", "text", "arrow", "pandas", "xml", "sql", "webdataset", "imagefolder",
     "audiofolder", "videofolder"}
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


class DataMap(dict[str, dict[str, Any]]):
    """A data map as read: its entries (``load_dataset`` arguments, local paths absolute), and
    where it came from, so that an error about one of its files can name the map to fix. The run
    settings hold this object (settings.py reads the map once); reading it again returns it."""

    origin: str  # "the data map /abs/m.yaml", "the in-line data_map mapping", ...
    root: str | None  # its ``root:``, absolute; None when it has none
    base: str  # what its relative paths resolve against: the root, else the file's folder or cwd

    def describe(self) -> str:
        """The map and what its relative paths resolve against, as words for a message."""
        where = (f"whose root is {self.root}" if self.root is not None
                 else f"which has no `root:` (its relative paths resolve against {self.base})")
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
            fix = (f"Fix that entry's data_files (or the map's root), point data_map at another map, or "
                   f"unset data_map to load '{task.dataset_path}' from the hub.")
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
    fix = ("Fix the path in the task's dataset_kwargs (or map the dataset with a data map); relative paths "
           "resolve against the task YAML's folder, else the working directory.")
    return DataSource(path, task.dataset_name, kwargs, _local_files(path, kwargs, f"task '{task.task}' ({task.source})", fix))


def check_data_files(tasks: Sequence[TaskConfig], data_map: DataMapLike = None) -> None:
    """Every local data file of ``tasks`` exists (no file is read, ``datasets`` is not imported).
    Checked when tasks are selected: the load_docs stage of a later task would otherwise find its
    file missing only after the model answered every earlier task."""
    for task in tasks:
        if task.custom_dataset is None:
            data_source(task, data_map)


def data_fingerprint(task: TaskConfig, data_map: DataMapLike = None) -> str:
    """The identity of the task's data, hashed: file contents for local data, split fingerprints for the hub."""
    identity = data_identity(task, data_map)
    return identity if isinstance(identity, str) else fingerprint(identity)


def data_identity(task: TaskConfig, data_map: DataMapLike = None) -> str | dict[str, Any]:
    """What keys the load_docs stage: :func:`data_fingerprint`'s hash, or for an image task whose
    rows name files, ``{"data": hash, "image_files": {path: hash of its bytes}}``, recorded as it is
    in the manifest so that ``explain`` names the image files that changed."""
    if task.custom_dataset is not None:
        return fingerprint({"custom_dataset": _custom_splits(task)})
    source = data_source(task, data_map)
    if source.is_local and task.doc_to_image is None:
        return _local_fingerprint(source)
    dataset = _load(task, source)
    fp = _local_fingerprint(source) if source.is_local else _hub_fingerprint(dataset)
    if task.doc_to_image is None:
        return fp
    files = named_files(dataset, fp)  # image tasks: the files rows name by path (taskspec.image_files)
    return {"data": fp, "image_files": files_identity(files)} if files else fp


def load_docset(task: TaskConfig, data_map: DataMapLike = None, images: Any = None) -> DocSet:
    """The evaluated documents and the few-shot pool of ``task``, processed and as plain dicts.

    ``images`` (an :class:`~evalflow.cache.images.ImageStore`) receives every image column's
    pixels, the rows holding :class:`~evalflow.records.ImageRef` instead; without it an image in
    the data is refused."""
    if task.custom_dataset is not None:  # lm-eval: a custom_dataset function wins over dataset_path
        dataset: Any = _custom_splits(task)
        source = DataSource("<custom_dataset>", None, {}, {})
        fp = fingerprint({"custom_dataset": dataset})
    else:
        source = data_source(task, data_map)
        dataset = _plain_jsonl(task, source) or _load(task, source)
        fp = _local_fingerprint(source) if source.is_local else _hub_fingerprint(dataset)
    eval_split = task.eval_split
    docs = _split_docs(task, dataset, eval_split, task.process_docs, source, images)
    fs_split, fs_docs = _fewshot_docs(task, dataset, source, eval_split, docs, images)
    return DocSet(eval_split, docs, fs_split, fs_docs, fp)


def _fewshot_docs(
    task: TaskConfig, dataset: Any, source: DataSource, eval_split: str,
    eval_docs: tuple[dict[str, Any], ...], images: Any = None,
) -> tuple[str | None, tuple[dict[str, Any], ...] | None]:
    """lm-eval's few-shot pool. A split the fallback chain names but the data lacks is skipped
    (lm-eval would fail), so a task evaluated on data without a train split still runs, drawing
    from the next split; ``DocSet.fewshot_split`` records the split actually used."""
    opts = fewshot_options(task)
    where = fewshot_source(task)
    if where is None:
        return None, None
    kind, value = where
    if kind == "samples":
        rows = call_function(value)() if not isinstance(value, (list, tuple)) else value
        return None, tuple(_plain_row(r, task, "fewshot_config.samples", i, images) for i, r in enumerate(rows))
    if opts.split is not None:
        if opts.split == eval_split and opts.process_docs == task.process_docs:
            return value, eval_docs
        return value, _split_docs(task, dataset, value, opts.process_docs, source, images)
    for split in (task.training_split, task.validation_split, task.test_split):
        if split is not None and split in dataset:
            if split == eval_split:
                return split, eval_docs
            return split, _split_docs(task, dataset, split, task.process_docs, source, images)
    return None, None


def _split_docs(
    task: TaskConfig, dataset: Any, split: str, process: Any, source: DataSource, images: Any = None
) -> tuple[dict[str, Any], ...]:
    if split not in dataset:
        raise DataError(
            f"task '{task.task}' ({task.source}): the data has no split '{split}' (it has "
            f"{sorted(dataset)}; loaded from {_describe(source)}). Point the task's split fields at "
            "an existing split, or add the split's file to data_files / the data map entry."
        )
    rows = dataset[split]
    if process is not None:
        rows = call_task_function(process, rows, task=task, what=f"process_docs (split '{split}')")
    return tuple(_plain_row(r, task, split, i, images) for i, r in enumerate(rows))


def _plain_jsonl(task: TaskConfig, source: DataSource) -> dict[str, list[dict[str, Any]]] | None:
    """Local JSON Lines rows read without ``datasets`` (taskspec/jsonl.py says when that gives the
    same rows), for a task with no process_docs (it may expect a ``datasets.Dataset``)."""
    if task.process_docs is not None or fewshot_options(task).process_docs is not None:
        return None
    return read_jsonl_splits(source.path, source.name, source.kwargs, source.files)


def _load(task: TaskConfig, source: DataSource) -> Any:
    import datasets  # type: ignore[import-untyped]  # only when documents are really read

    from evalflow.taskspec.hub import hub_endpoint, hub_offline, offline_by_env, offline_mode

    from_hub = not source.is_local and not source.mapped_from and "://" not in repr(source.kwargs)
    offline = from_hub and hub_offline()  # no ~30 s of hub retries when it cannot be reached
    try:
        with offline_mode(offline):
            return datasets.load_dataset(source.path, source.name, **source.kwargs)
    except Exception as exc:  # noqa: BLE001 - every failure here means "the data cannot be read"
        cause = exc.__cause__ or exc.__context__
        why = f"{type(exc).__name__}: {str(exc)[:300]}" + (
            f" ({type(cause).__name__}: {str(cause)[:300]})" if cause is not None else ""
        )
        if offline:
            why = ("HF_HUB_OFFLINE is set" if offline_by_env() else f"the hub {hub_endpoint()} is unreachable") + (
                f" and the dataset is not in the local datasets cache ({why})")
        if source.is_local or source.mapped_from:
            fix = (
                "Check that the files are valid JSON Lines/CSV/Parquet, with the same "
                "columns in every split."
            )
        else:
            key = f"{task.dataset_path}" + (f"/{task.dataset_name}" if task.dataset_name else "")
            fix = (
                "Without network access to the hub, point the dataset at local files with a data map: "
                "the run config key data_map (a mapping, or a file such as conf/data_maps/shared.yaml) "
                f"or ${DATA_MAP_ENV}=<file>, with an entry "
                f"'{key}: {{path: json, data_files: {{test: ...}}}}'."
            )
        raise DataError(
            f"task '{task.task}' ({task.source}): cannot load the dataset {_describe(source)}: {why}. {fix}"
        ) from None


def _custom_splits(task: TaskConfig) -> dict[str, list[dict[str, Any]]]:
    """lm-eval's ``custom_dataset(**metadata, **dataset_kwargs)``: splits of rows, as JSON data."""
    made = call_function(task.custom_dataset)(**(task.metadata or {}), **(task.dataset_kwargs or {}))
    if not isinstance(made, Mapping):
        raise DataError(
            f"task '{task.task}' ({task.source}): custom_dataset returned a {type(made).__name__}; it "
            "must return a mapping of split names to lists of rows."
        )
    return {
        str(split): [_plain_row(r, task, str(split), i) for i, r in enumerate(rows)]
        for split, rows in made.items()
    }


def _hub_fingerprint(dataset: Any) -> str:
    return fingerprint({str(split): getattr(dataset[split], "_fingerprint", None) for split in dataset})


def _local_fingerprint(source: DataSource) -> str:
    extra = {k: v for k, v in source.kwargs.items() if k not in ("data_files", "data_dir")}
    files = {key: [file_fingerprint(f) for f in paths] for key, paths in source.files.items()}
    builder = source.path if source.path in PACKAGED_BUILDERS else "<local>"
    return fingerprint({"builder": builder, "name": source.name, "kwargs": extra, "files": files})


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
                raise DataError(f"{task + ': ' if task else ''}data file {str(pattern)!r} (data_files "
                                f"'{key or 'all'}') {what}. {fix}".strip())
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
    """A data-map file; ``${...}`` interpolations (``${evalflow.repo_root:}`` in the shipped
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
        raise DataError(f"data map file {str(path)!r}: an interpolation does not resolve: {exc}") from None
    return dict(resolved)  # type: ignore[arg-type]


def _plain_row(row: Any, task: TaskConfig, split: str, index: int, images: Any = None) -> dict[str, Any]:
    """A row as JSON data, so documents hash canonically and cache as data, never as pickles;
    an image (PIL, or datasets' undecoded ``{bytes, path}``) as a reference into ``images``."""
    def plain(v: Any, key: str) -> Any:
        if v is None or isinstance(v, (str, bool, int, float)):
            return v
        if images is not None and is_image_value(v):
            return plain_image(v, images)
        if isinstance(v, (list, tuple)):
            return [plain(x, key) for x in v]
        if isinstance(v, Mapping):
            return {str(k): plain(x, key) for k, x in v.items()}
        if hasattr(v, "tolist"):  # numpy scalars and arrays from process_docs
            return plain(v.tolist(), key)
        raise DataError(
            f"task '{task.task}', split '{split}', document {index}: field '{key}' holds a "
            f"{type(v).__name__}, which evalflow cannot keep as JSON data (images are kept as references "
            "into the cache; other objects must be converted in process_docs)."
        )
    if not isinstance(row, Mapping):
        raise DataError(
            f"task '{task.task}', split '{split}', document {index} is a {type(row).__name__}, "
            "not a mapping; process_docs must return rows as mappings."
        )
    return {str(k): plain(v, str(k)) for k, v in row.items()}


def _describe(source: DataSource) -> str:
    what = f"'{source.path}'" + (f" (name '{source.name}')" if source.name else "")
    return what + (f" via {source.map_origin}" if source.map_origin else "")
