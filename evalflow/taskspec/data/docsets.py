"""A task's documents, loaded with the ``datasets`` library as lm-eval loads them, and their identity.

``load_docset`` calls ``datasets.load_dataset(dataset_path, dataset_name, **dataset_kwargs)``,
takes the evaluated split (test, else validation) and the few-shot pool (``fewshot_config.split``
/ ``fewshot_split``, else ``fewshot_config.samples``, else training, validation, test), applies
``process_docs`` and turns the rows into plain JSON dicts.

Where the data is read from (the task's dataset fields, or a **data map** entry that points a hub
dataset at local files) is :mod:`evalflow.taskspec.data.datamap`.

``data_fingerprint`` is the identity of the data, not of its path: the xxhash of local files'
bytes (without importing ``datasets``, so a cached re-run stays fast), or the ``datasets``
library's fingerprint of every split of a hub dataset; for an image task (``doc_to_image``), also
the bytes of the files its rows name by path (:mod:`evalflow.taskspec.data.image_files`, which reads the
rows to find them).

    docs = load_docset(task, "conf/data_maps/shared.yaml")
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalflow.cache.fingerprint import file_fingerprint, fingerprint
from evalflow.config.data_map import DATA_MAP_ENV, PACKAGED_BUILDERS, DataMapLike
from evalflow.core.records import DocSet
from evalflow.errors import DataError
from evalflow.taskspec.data.datamap import DataSource, data_source
from evalflow.taskspec.data.image_files import files_identity, named_files
from evalflow.taskspec.data.images import is_image_value, plain_image
from evalflow.taskspec.data.jsonl import read_jsonl_splits
from evalflow.taskspec.format.spec import TaskConfig
from evalflow.taskspec.prompts.samplers import fewshot_options, fewshot_source
from evalflow.taskspec.prompts.templates import call_function, call_task_function


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
    dataset = _read_splits(task, source)
    fp = _local_fingerprint(source) if source.is_local else _hub_fingerprint(dataset)
    if task.doc_to_image is None:
        return fp
    files = named_files(dataset, fp)  # image tasks: the files rows name by path (taskspec.data.image_files)
    return {"data": fp, "image_files": files_identity(files)} if files else fp


def load_docset(task: TaskConfig, data_map: DataMapLike = None, images: Any = None) -> DocSet:
    """The evaluated documents and the few-shot pool of ``task``, processed and as plain dicts.

    ``images`` (an :class:`~evalflow.cache.image_store.ImageStore`) receives every image column's
    pixels, the rows holding :class:`~evalflow.core.records.ImageRef` instead; without it an image in
    the data is refused."""
    if task.custom_dataset is not None:  # lm-eval: a custom_dataset function wins over dataset_path
        dataset: Any = _custom_splits(task)
        source = DataSource("<custom_dataset>", None, {}, {})
        fp = fingerprint({"custom_dataset": dataset})
    else:
        source = data_source(task, data_map)
        dataset = _read_splits(task, source)
        fp = _local_fingerprint(source) if source.is_local else _hub_fingerprint(dataset)
    eval_split = task.eval_split
    docs = _split_docs(task, dataset, eval_split, task.process_docs, source, images)
    fs_split, fs_docs = _fewshot_docs(task, dataset, source, eval_split, docs, images)
    return DocSet(eval_split, docs, fs_split, fs_docs, fp)


def _fewshot_docs(
    task: TaskConfig,
    dataset: Any,
    source: DataSource,
    eval_split: str,
    eval_docs: tuple[dict[str, Any], ...],
    images: Any = None,
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
            f"{sorted(dataset)}; loaded from {source.describe()}). Point the task's split fields at "
            "an existing split, or add the split's file to data_files / the data map entry."
        )
    rows = dataset[split]
    if process is not None:
        rows = call_task_function(process, rows, task=task, what=f"process_docs (split '{split}')")
    return tuple(_plain_row(r, task, split, i, images) for i, r in enumerate(rows))


def _read_splits(task: TaskConfig, source: DataSource) -> Any:
    """The task's splits as read, before ``process_docs``: plain rows when ``datasets`` would
    certainly give the same ones (:func:`_plain_jsonl`), else the ``datasets`` dataset. The one
    way rows are read, so the identity of the data and the documents see the same rows."""
    return _plain_jsonl(task, source) or _load(task, source)


def _plain_jsonl(task: TaskConfig, source: DataSource) -> dict[str, list[dict[str, Any]]] | None:
    """Local JSON Lines rows read without ``datasets`` (taskspec/data/jsonl.py says when that gives the
    same rows), for a task with no process_docs (it may expect a ``datasets.Dataset``)."""
    if task.process_docs is not None or fewshot_options(task).process_docs is not None:
        return None
    return read_jsonl_splits(source.path, source.name, source.kwargs, source.files)


def _load(task: TaskConfig, source: DataSource) -> Any:
    import datasets  # only when documents are really read

    from evalflow.taskspec.data.hub import hub_endpoint, hub_offline, offline_by_env, offline_mode

    from_hub = not source.is_local and not source.mapped_from and "://" not in repr(source.kwargs)
    offline = from_hub and hub_offline()  # no ~30 s of hub retries when it cannot be reached
    try:
        with offline_mode(offline):
            return datasets.load_dataset(source.path, source.name, **source.kwargs)
    except Exception as exc:
        cause = exc.__cause__ or exc.__context__
        why = f"{type(exc).__name__}: {str(exc)[:300]}" + (
            f" ({type(cause).__name__}: {str(cause)[:300]})" if cause is not None else ""
        )
        if offline:
            why = ("HF_HUB_OFFLINE is set" if offline_by_env() else f"the hub {hub_endpoint()} is unreachable") + (
                f" and the dataset is not in the local datasets cache ({why})"
            )
        if source.is_local or source.mapped_from:
            fix = "Check that the files are valid JSON Lines/CSV/Parquet, with the same columns in every split."
        else:
            key = f"{task.dataset_path}" + (f"/{task.dataset_name}" if task.dataset_name else "")
            fix = (
                "Without network access to the hub, point the dataset at local files with a data map: "
                "the run config key data_map (a mapping, or a file such as conf/data_maps/shared.yaml) "
                f"or ${DATA_MAP_ENV}=<file>, with an entry "
                f"'{key}: {{path: json, data_files: {{test: ...}}}}'."
            )
        raise DataError(
            f"task '{task.task}' ({task.source}): cannot load the dataset {source.describe()}: {why}. {fix}"
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
        str(split): [_plain_row(r, task, str(split), i) for i, r in enumerate(rows)] for split, rows in made.items()
    }


def _hub_fingerprint(dataset: Any) -> str:
    return fingerprint({str(split): getattr(dataset[split], "_fingerprint", None) for split in dataset})


def _local_fingerprint(source: DataSource) -> str:
    extra = {k: v for k, v in source.kwargs.items() if k not in ("data_files", "data_dir")}
    files = {key: [file_fingerprint(f) for f in paths] for key, paths in source.files.items()}
    builder = source.path if source.path in PACKAGED_BUILDERS else "<local>"
    return fingerprint({"builder": builder, "name": source.name, "kwargs": extra, "files": files})


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
