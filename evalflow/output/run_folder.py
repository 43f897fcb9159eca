"""Writing a run folder so that its completeness can be trusted.

Every file is written to a temporary name and renamed into place (atomic on POSIX), and
``results.json`` is written last: a folder holding results.json is a run that finished. A run that
fails leaves whatever it wrote before (the ``.hydra`` snapshot, samples) but never results.json.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

from evalflow.errors import ConfigError
from evalflow.output.code_execution import code_execution
from evalflow.output.inputs import plain
from evalflow.output.json_text import indented_json
from evalflow.output.results import RunRecord
from evalflow.cache.store import MISSING, CacheStore
from evalflow.cache.text import TextFile, text_source
from evalflow.output.samples import samples_key, samples_text
from evalflow.taskspec.format.installed import TASK_LIBRARIES
from evalflow.taskspec.format.spec import TaskConfig

WRITERS = 8  # threads writing and syncing a run folder's files
PACKAGES = ("evalflow", "torch", "transformers", "datasets", "hydra-core", "omegaconf", "diskcache", "xxhash", "numpy", "lm-eval")


def atomic_write(path: Path, chunks: Iterable[str | bytes | memoryview | TextFile]) -> None:
    """Write ``chunks`` (text, UTF-8 bytes as they are, or a cached text's value file, which the
    kernel copies) to a temporary name, then rename it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
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


def write_json(path: Path, value: Any) -> None:
    """``json.dumps(value, indent=2, ensure_ascii=False, default=str)`` and a newline (written by
    orjson when its text is the same: :mod:`evalflow.output.json_text`)."""
    atomic_write(path, [indented_json(value), "\n"])


def manifest(record: RunRecord) -> dict[str, Any]:
    """What ran and why: every stage's key, hit/miss, seconds and key inputs (``explain`` diffs
    these), the model's identity as plain data, request counts, data fingerprints, versions."""
    return {
        "stages": [
            {"task": e.task, "stage": e.stage, "key": e.key, "hit": e.hit, "seconds": e.seconds,
             **({"requests": dict(e.detail)} if e.detail else {}), "inputs": plain(e.inputs)}
            for e in record.events
        ],
        "model_identity": plain(record.model_identity),
        "inference": {
            "requests": record.inference.requests,
            "computed": record.inference.computed,
            "cached": record.inference.cached,
            # what a loaded model says of itself, e.g. what a server's /v1/models reported
            **({"model": record.inference.model} if record.inference.model is not None else {}),
            # a served model: HTTP requests each server (base_url) answered
            **({"servers": dict(record.inference.servers)} if record.inference.servers else {}),
        },
        # judge metrics: the judge models' requests, as the scored model's above, and who the judges were
        **({"judge": {"requests": record.judge.requests, "computed": record.judge.computed, "cached": record.judge.cached,
                      "models": plain(dict(record.judge_identities))}} if record.judge is not None else {}),
        # which model replica computed how much (one "local@host:pid", or one per Ray worker)
        "workers": {name: dataclasses.asdict(w) for name, w in sorted(record.inference.workers.items())},
        "data": {t: record.summary(t).data for t in record.outputs},
        "data_map": _data_map_record(record.settings.data_map_file),
        # the sandbox that ran model-written programs, the side environments that ran task code
        "code_execution": code_execution(record.selection.tasks, record.settings.code_sandbox, record.selection.groups),
        "fewshot_split": {t: record.summary(t).fewshot_split for t in record.outputs},
        "packages": {name: _version(name) for name in PACKAGES},
        "cache_dir": str(record.settings.cache_dir),
        "seconds": round(record.finished - record.started, 3),
        # of which some model replica was answering requests (start-up and model loads excluded)
        "answering_seconds": round(record.inference.answering_seconds, 6),
    }


def run_files(folder: Path) -> list[str]:
    """The files in ``folder`` that a run writes (Hydra's ``.hydra/`` snapshot aside)."""
    if not folder.is_dir():
        return []
    names = ["results.json", "manifest.json"] + sorted(p.name for p in folder.glob("samples_*.jsonl"))
    return [name for name in names if (folder / name).exists()]


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
    out = dict(config)
    value = out.get("data_map")
    if map_file is not None and not (isinstance(value, str) and "/" not in value and value == Path(map_file).stem):
        out["data_map"] = map_file
    tasks = out.get("task")
    if isinstance(tasks, (str, list)):
        absolute = [str(Path(t).resolve()) if isinstance(t, str) and Path(t).is_file() and not Path(t).is_absolute() else t
                    for t in ([tasks] if isinstance(tasks, str) else tasks)]
        out["task"] = absolute[0] if isinstance(tasks, str) else absolute
    paths = out.get("include_path")
    if isinstance(paths, (str, list)):  # a library name (include_path=lm_eval) stays a name: the installed package
        folders = [str(Path(p).resolve()) if isinstance(p, str) and Path(p).is_dir() and p not in TASK_LIBRARIES else p
                   for p in ([paths] if isinstance(paths, str) else paths)]
        out["include_path"] = folders[0] if isinstance(paths, str) else folders
    return out


OBJECT_MODEL = "python-object"  # the model.type a snapshot records for a model object: it cannot be rebuilt


def write_snapshot(folder: Path, config: Any, model_object: Any = None, map_file: str | None = None) -> None:
    """``.hydra/config.yaml`` (and ``overrides.yaml``) as a command-line run writes them, for a run
    started from Python: the composed config, so ``--config-dir folder/.hydra`` reproduces it. A
    model object is recorded by its class and ``identity()``; reproducing refuses it by name."""
    from omegaconf import OmegaConf, open_dict

    snapshot = OmegaConf.create(pinned(OmegaConf.to_container(config, resolve=False), map_file))
    if model_object is not None:
        ident = getattr(model_object, "identity", None)
        with open_dict(snapshot):
            snapshot.model = {"type": OBJECT_MODEL, "class": f"{type(model_object).__module__}.{type(model_object).__qualname__}",
                              "identity": plain(ident()) if callable(ident) else None}
    hydra = folder / ".hydra"
    hydra.mkdir(parents=True, exist_ok=True)
    atomic_write(hydra / "config.yaml", [OmegaConf.to_yaml(snapshot)])
    atomic_write(hydra / "overrides.yaml", ["# written by evalflow.evaluate(): config.yaml holds every setting\n[]\n"])


def write_run_folder(folder: Path, record: RunRecord, results: dict[str, Any], store: CacheStore | None = None) -> None:
    """The manifest and samples files, then results.json (last: its presence means done).
    With ``store``, each task's samples text is read from (or added to) the cache, here, in
    order; the files are written and synced by threads (``fsync`` and the kernel's copy release
    the GIL, so a run's 59 syncs overlap instead of queueing), all of them finished before
    results.json is written."""
    folder.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="evalflow-write") as pool:
        written = [pool.submit(write_json, folder / "manifest.json", manifest(record))]
        if record.settings.log_samples:
            for task in record.selection.tasks:  # texts built (or found) here, written and synced meanwhile
                written.append(pool.submit(atomic_write, folder / f"samples_{task.task}.jsonl",
                                           [_samples(task, record, store)]))
        for future in written:  # every file synced and in place (else its error) before results.json
            future.result()
    write_json(folder / "results.json", results)


def _samples(task: TaskConfig, record: RunRecord, store: CacheStore | None) -> bytes | memoryview | TextFile:
    """The task's samples file as UTF-8 bytes: from the cache as stored (its value file, copied
    by the kernel), else built and stored."""
    key = samples_key({e.stage: e.key for e in record.events if e.task == task.task}) if store is not None else None
    if key is not None:
        cached = text_source(store, key)  # type: ignore[arg-type]
        if cached is not MISSING:
            return cached
    data = samples_text(task, record.outputs[task.task]).encode("utf-8")
    if key is not None:
        store.put_text(key, data, tag="samples")  # type: ignore[union-attr]
    return data


def _data_map_record(path: str | None) -> dict[str, str] | None:
    if path is None:
        return None
    from evalflow.cache.fingerprint import file_fingerprint

    return {"file": path, "xxh64": file_fingerprint(path)}


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
