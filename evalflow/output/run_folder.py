"""Run folders, read and written in one place; every file's name and path comes from
:mod:`evalflow.output.run_paths`, the one module that spells them.

A run folder holds ``.hydra/`` (the snapshot: ``config.yaml``, the composed config that reproduces
the run, and ``overrides.yaml``), ``samples_<task>.jsonl`` (per-document records),
``manifest.json`` (what ran and why) and ``results.json``, written last: a folder holding
results.json is a run that finished (:func:`is_complete`). Every file is written to a temporary
name and renamed into place (atomic on POSIX); a run that fails leaves whatever it wrote before
(the snapshot, samples) but never results.json.

Reading gives one shape, :class:`Run`, for evalflow's folders and lm-eval 0.4.x's output folders
(``results_<date>.json``, ``samples_<task>_<date>.jsonl``, possibly one folder down, under the
model's name)::

    run = load_run(Path("outputs/2026-11-30/12-00-00"))
    run.results["results"]["arc_easy"]["acc,none"], run.per_doc("arc_easy", "acc", "none")
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalflow.cache.fingerprint import fingerprint
from evalflow.cache.store import MISSING
from evalflow.cache.text import TextFile, text_source
from evalflow.errors import ConfigError, RunFolderError
from evalflow.output.inputs import plain
from evalflow.output.json_text import indented_json
from evalflow.output.run_paths import (
    LMEVAL_RESULTS_GLOB,
    LMEVAL_RESULTS_PATTERN,
    RESULTS,
    SAMPLES_GLOB,
    SNAPSHOT_CONFIG,
    is_lmeval_results,
    lmeval_samples_files,
    manifest_file,
    results_file,
    samples_file,
    samples_files,
    snapshot_config,
    snapshot_dir,
    snapshot_overrides,
)

if TYPE_CHECKING:
    from evalflow.cache.store import CacheStore
    from evalflow.output.results import RunRecord
    from evalflow.taskspec.format.spec import TaskConfig


def is_complete(folder: Path) -> bool:
    """Whether ``folder`` holds a finished evalflow run (its results.json, written last)."""
    return results_file(folder).is_file()


# --- reading ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One finished run: its results dict, its samples files, and (evalflow) its manifest."""

    folder: Path
    kind: str  # "evalflow" or "lm-eval"
    results: Mapping[str, Any]
    samples_files: Mapping[str, Path]  # task -> samples file
    manifest: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.folder.name

    @property
    def model_name(self) -> str:
        """The model that ran, as results.json names it (a model object: its identity's name or class)."""
        return str(self.results.get("model_name", ""))

    @property
    def samples(self) -> tuple[Path, ...]:
        """The samples files, sorted by path."""
        return tuple(sorted(self.samples_files.values()))

    @property
    def config_file(self) -> Path | None:
        """The snapshot's composed config, when the folder has one."""
        path = snapshot_config(self.folder)
        return path if path.is_file() else None

    @cached_property
    def config(self) -> Mapping[str, Any]:
        """The composed config (``.hydra/config.yaml``); for a run without a snapshot (lm-eval's,
        or evaluate() without one), results.json's lm-eval "config" block (the model that ran,
        its args, limit, seeds)."""
        if self.config_file is None:
            return self.results.get("config") or {}
        from omegaconf import DictConfig, OmegaConf

        from evalflow.config.omegaconf_dicts import to_dict

        loaded = OmegaConf.load(self.config_file)
        return to_dict(loaded, resolve=False) if isinstance(loaded, DictConfig) else {}

    def tasks(self) -> list[str]:
        """Leaf tasks (those with samples or configs), in results order."""
        subtasks = self.results.get("group_subtasks", {})  # lm-eval lists leaf tasks too, with []
        groups = set(self.results.get("groups", {})) | {g for g, members in subtasks.items() if members}
        return [t for t in self.results.get("results", {}) if t not in groups]

    def groups(self) -> dict[str, list[str]]:
        """Each group's leaf tasks (nested groups flattened)."""
        subtasks: Mapping[str, list[str]] = self.results.get("group_subtasks", {})

        def leaves(name: str) -> list[str]:
            return [leaf for m in subtasks.get(name, []) for leaf in (leaves(m) if subtasks.get(m) else [m])]

        return {g: leaves(g) for g in subtasks if subtasks[g]}

    def data_fingerprint(self, task: str) -> str | None:
        return self.manifest.get("data", {}).get(task)

    def rows(self, task: str) -> list[dict[str, Any]]:
        return self._rows.get(task) or self._read(task)

    @cached_property
    def _rows(self) -> dict[str, list[dict[str, Any]]]:
        return {}

    def _read(self, task: str) -> list[dict[str, Any]]:
        path = self.samples_files.get(task)
        if path is None:
            raise RunFolderError(
                f"{self.folder}: no samples file for task '{task}'; per-document views and paired tests "
                "need samples (evalflow: log_samples=true, the default; lm-eval: --log_samples)"
            )
        rows = []
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except ValueError as exc:
                        raise RunFolderError(f"{path}, line {n}: not JSON ({exc}); is the file complete?") from None
        self._rows[task] = rows
        return rows

    def filters(self, task: str) -> list[str]:
        return list(dict.fromkeys(str(r.get("filter", "none")) for r in self.rows(task)))

    def per_doc(self, task: str, metric: str, filter_name: str) -> dict[int, Any]:
        """doc_id -> the document's value of ``metric`` under ``filter_name``."""
        return {
            int(r["doc_id"]): r[metric]
            for r in self.rows(task)
            if str(r.get("filter", "none")) == filter_name and metric in r
        }

    def clusters(self, task: str) -> dict[int, str] | None:
        """doc_id -> the document's cluster id (the samples lines' ``cluster``, written for a task
        with ``cluster_key``); None when the task's documents carry none (no cluster_key, or an
        lm-eval folder, or no samples file)."""
        if task not in self.samples_files and task not in self._rows:
            return None
        ids = {int(r["doc_id"]): str(r["cluster"]) for r in self.rows(task) if "cluster" in r}
        return ids or None

    def doc_ids(self, task: str, filter_name: str) -> set[int]:
        """The documents scored under ``filter_name``, with or without a value of any one metric."""
        return {int(r["doc_id"]) for r in self.rows(task) if str(r.get("filter", "none")) == filter_name}

    @property
    def hashes_images(self) -> bool:
        """Whether its samples name images by pixel hash (evalflow's); lm-eval's show a PIL repr."""
        return self.kind == "evalflow"

    def doc_fingerprints(self, task: str, images: bool = True) -> dict[int, str]:
        """doc_id -> the identity of what the run read for the document: its row and (``images``)
        the pixel hashes of the images its requests showed. A row that names its image by file
        path stays the same when the file is edited; the hashes do not."""

        def identity(row: Mapping[str, Any]) -> str:
            digests = image_digests(row.get("arguments")) if images else []
            return fingerprint({"doc": row.get("doc"), "images": digests}) if digests else fingerprint(row.get("doc"))

        return {int(r["doc_id"]): identity(r) for r in self.rows(task)}


def image_digests(value: Any) -> list[str]:
    """The pixel hashes of the images (``{"__image__": digest, ...}``) in a samples value, in order."""
    if isinstance(value, Mapping):
        if "__image__" in value:
            return [str(value["__image__"])]
        return [d for v in value.values() for d in image_digests(v)]
    if isinstance(value, list):
        return [d for v in value for d in image_digests(v)]
    return []


def load_run(folder: Path) -> Run:
    """An evalflow run folder or an lm-eval output folder (or the results_*.json file itself)."""
    folder = Path(folder)
    if not folder.exists():
        raise RunFolderError(f"{folder}: no such folder; give the run folder a run wrote (its `run folder:` line)")
    if folder.is_file() and is_lmeval_results(folder):
        return _lm_eval(folder)
    if is_complete(folder):
        manifest = manifest_file(folder)
        recorded = _json(manifest) if manifest.is_file() else {}
        return Run(folder, "evalflow", _json(results_file(folder)), samples_files(folder), recorded)
    found = sorted(folder.rglob(LMEVAL_RESULTS_GLOB)) if folder.is_dir() else []
    if found:
        return _lm_eval(found[-1])  # the latest: lm-eval names them by date
    raise RunFolderError(
        f"{folder}: neither an evalflow run folder ({RESULTS}; a folder without it did not finish) "
        f"nor an lm-eval output folder ({LMEVAL_RESULTS_PATTERN}); give the folder a run wrote"
    )


def _lm_eval(results: Path) -> Run:
    return Run(results.parent, "lm-eval", _json(results), lmeval_samples_files(results))


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RunFolderError(f"{path}: not valid JSON ({exc})") from None


def finished_run(folder: Path | str) -> Run | None:
    """The finished evalflow run in ``folder`` (a path or its text); None when it has no
    results.json (the run did not finish)."""
    folder = Path(folder)
    return load_run(folder) if is_complete(folder) else None


def metric_keys(entry: Mapping[str, Any], with_null: bool = False) -> Iterator[tuple[str, str]]:
    """(metric, filter) of each value in a results entry (``"acc,none"``), stderr keys skipped;
    ``with_null``: also results reported without a value (a judge metric none of whose verdicts parsed)."""
    for key, value in entry.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if "," in key and "_stderr," not in key and (number or (with_null and value is None)):
            metric, filt = key.split(",", 1)
            yield metric, filt


# --- writing ----------------------------------------------------------------------------------

WRITERS = 8  # threads writing and syncing a run folder's files


def atomic_write(path: Path, chunks: Iterable[str | bytes | memoryview | TextFile]) -> None:
    """Write ``chunks`` (text, UTF-8 bytes as they are, or a cached text's value file, which the
    kernel copies) to a temporary name, then rename it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _new_file(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                if isinstance(chunk, TextFile):
                    chunk.copy_to(fh)
                else:
                    fh.write(chunk.encode("utf-8") if isinstance(chunk, str) else chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _new_file(path: Path) -> tuple[int, Path]:
    """A new, unique temporary file beside ``path``, opened for writing, with the mode ``open()``
    gives a new file: 0o666 less the umask, which the kernel applies as it creates the file (so
    threads need not read the process-wide umask). ``tempfile.mkstemp`` would make it 0o600, and
    the rename would leave a run's results readable by their owner only."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:  # another writer's name (1 in 2**48): draw again, as mkstemp does
            continue


def write_json(path: Path, value: Any) -> None:
    """``json.dumps(value, indent=2, ensure_ascii=False, default=str)`` and a newline (written by
    orjson when its text is the same: :mod:`evalflow.output.json_text`)."""
    atomic_write(path, [indented_json(value), "\n"])


def run_files(folder: Path) -> list[str]:
    """The files in ``folder`` that a run writes (Hydra's ``.hydra/`` snapshot aside)."""
    if not folder.is_dir():
        return []
    paths = [results_file(folder), manifest_file(folder), *sorted(folder.glob(SAMPLES_GLOB))]
    return [path.name for path in paths if path.exists()]


def ensure_fresh(folder: Path, setting: str = "hydra.run.dir") -> None:
    """Refuse a run folder that already holds another run's files: two runs writing into one
    folder would leave one run's samples beside the other's results."""
    found = run_files(folder)
    if found:
        raise ConfigError(
            f"the run folder {folder} already holds a run ({', '.join(found[:4])}); evalflow never writes one "
            f"run over another. Pick a new folder ({setting}=...), or move that one away first."
        )


def pinned(config: dict[str, Any], map_file: str | None) -> dict[str, Any]:
    """A run's config as its snapshot must hold it to reproduce from any folder: the data map it
    used as the map file's absolute path (a map given by ``$EVALFLOW_DATA_MAP`` or a relative path;
    a map named by its conf/ name stays a name), task files and include_path folders absolute (a
    task library's name, ``lm_eval``, stays a name: the manifest records the package's version, and
    its task code's keys hold it, so a reproduction under another version recomputes)."""
    from evalflow.taskspec.format.installed import TASK_LIBRARIES

    out = dict(config)
    value = out.get("data_map")
    if map_file is not None and not (isinstance(value, str) and "/" not in value and value == Path(map_file).stem):
        out["data_map"] = map_file
    tasks = out.get("task")
    if isinstance(tasks, (str, list)):
        absolute = [
            str(Path(t).resolve()) if isinstance(t, str) and Path(t).is_file() and not Path(t).is_absolute() else t
            for t in ([tasks] if isinstance(tasks, str) else tasks)
        ]
        out["task"] = absolute[0] if isinstance(tasks, str) else absolute
    paths = out.get("include_path")
    if isinstance(paths, (str, list)):  # a library name (include_path=lm_eval) stays a name: the installed package
        folders = [
            str(Path(p).resolve()) if isinstance(p, str) and Path(p).is_dir() and p not in TASK_LIBRARIES else p
            for p in ([paths] if isinstance(paths, str) else paths)
        ]
        out["include_path"] = folders[0] if isinstance(paths, str) else folders
    return out


OBJECT_MODEL = "python-object"  # the model.type a snapshot records for a model object: it cannot be rebuilt


def write_snapshot(folder: Path, config: Any, model_object: Any = None, map_file: str | None = None) -> None:
    """``.hydra/config.yaml`` (and ``overrides.yaml``) as a command-line run writes them, for a run
    started from Python: the composed config, so ``--config-dir folder/.hydra`` reproduces it. A
    model object is recorded by its class and ``identity()``; reproducing refuses it by name."""
    from omegaconf import OmegaConf, open_dict

    from evalflow.config.omegaconf_dicts import to_dict

    snapshot = OmegaConf.create(pinned(to_dict(config, resolve=False), map_file))
    if model_object is not None:
        ident = getattr(model_object, "identity", None)
        with open_dict(snapshot):
            snapshot.model = {
                "type": OBJECT_MODEL,
                "class": f"{type(model_object).__module__}.{type(model_object).__qualname__}",
                "identity": plain(ident()) if callable(ident) else None,
            }
    snapshot_dir(folder).mkdir(parents=True, exist_ok=True)
    atomic_write(snapshot_config(folder), [OmegaConf.to_yaml(snapshot)])
    atomic_write(
        snapshot_overrides(folder),
        [f"# written by evalflow.evaluate(): {SNAPSHOT_CONFIG} holds every setting\n[]\n"],
    )


def write_run_folder(
    folder: Path,
    record: RunRecord,
    results: dict[str, Any],
    store: CacheStore | None = None,
    before_results: Callable[[], None] | None = None,
) -> None:
    """The manifest and samples files, then ``before_results()`` (the events file's end line),
    then results.json (last: its presence means done).
    With ``store``, each task's samples text is read from (or added to) the cache, here, in
    order; the files are written and synced by threads (``fsync`` and the kernel's copy release
    the GIL, so a run's 59 syncs overlap instead of queueing), all of them finished before
    results.json is written."""
    from evalflow.output.manifest import manifest

    folder.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="evalflow-write") as pool:
        written = [pool.submit(write_json, manifest_file(folder), manifest(record))]
        if record.settings.log_samples:
            for task in record.selection.tasks:  # texts built (or found) here, written and synced meanwhile
                written.append(
                    pool.submit(atomic_write, samples_file(folder, task.task), [_samples(task, record, store)])
                )
        for future in written:  # every file synced and in place (else its error) before results.json
            future.result()
    if before_results is not None:
        before_results()
    write_json(results_file(folder), results)


def _samples(task: TaskConfig, record: RunRecord, store: CacheStore | None) -> bytes | memoryview | TextFile:
    """The task's samples file as UTF-8 bytes: from the cache as stored (its value file, copied
    by the kernel), else the ``samples`` output node's text (built and stored then)."""
    outputs = record.outputs[task.task]
    key = outputs.node_keys.get("samples")
    if store is not None and key is not None:
        cached = text_source(store, key)
        if cached is not MISSING:
            return cached
    return outputs["samples"].encode("utf-8")
