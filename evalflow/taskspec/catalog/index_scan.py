"""One task folder's names, scanned and cached on disk (for :class:`evalflow.taskspec.catalog.index.TaskIndex`).

Each YAML is classified from its header (``class`` / ``group`` / ``task`` / ``task_list``, as
lm-eval 0.4.13's ``TaskIndex`` does), without importing task code; within one folder the first
file (in path order) to use a name keeps it. Each folder's result is cached in
``<cache>/index/<hash of folder>.json``, with every YAML's (size, mtime_ns) and those of the files
it includes: a warm build stats the files and reads one JSON file; a changed file is re-read alone
(its old per-file record comes from ``...records.json``).

    rows, skipped = scan_root("/abs/tasks")   # [[name, kind, rel path, item, is_python, tags]], [(file, why)]
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import xxhash

from evalflow.cache.store import default_cache_dir
from evalflow.errors import TaskError
from evalflow.taskspec.catalog.selection import kind_of

log = logging.getLogger(__name__)

INDEX_FORMAT = 3  # bump when classification or the file layout changes: old caches are ignored
_IGNORE_DIRS = frozenset({"__pycache__"})
# A folder holding one of these is not a task folder: a Hydra run (``.hydra/`` snapshot) or sweep
# (``multirun.yaml``), whose config YAMLs have a ``task:`` key; a virtual environment.
_NOT_TASK_FOLDER_MARKERS = frozenset({".hydra", "multirun.yaml", "pyvenv.cfg", "conda-meta"})
# In memory (and, with deps as indices into a table, in the cache files):
#   a file record  [size, mtime_ns, deps, found, error]; deps [[path, size, mtime_ns], ...]
#   a found entry  [kind, name, tags, task_list item or None, is_python_task]
#   an index row   [name, kind, path relative to its folder, item, is_python_task, tag members]
Record = list[Any]
Row = list[Any]


def scan_root(root: str) -> tuple[list[Row], list[tuple[str, str]]]:
    """One folder's rows and skipped files, from the cache when no file changed."""
    files = _walk(root)
    base = default_cache_dir() / "index" / xxhash.xxh64_hexdigest(root.encode())
    cached = _read_json(base.with_suffix(".json"), root)
    digest = _listing_digest(files)
    if cached.get("listing") == digest and not cached["problems"] and _deps_fresh(cached["deps"]):
        return cached["rows"], []
    old = _old_records(cached, _read_json(base.with_suffix(".records.json"), root))
    memo: dict[str, Any] = {}
    stats: dict[str, tuple[int, int]] = {path: (size, mtime) for _rel, path, size, mtime in files}
    records: dict[str, Record] = {}
    for rel, path, size, mtime in files:
        record = old.get(rel)
        if record is None or not _reusable(record, size, mtime, stats):
            record = _scan_file(path, size, mtime, memo)
        records[rel] = record
    rows = _root_rows(records)
    _write_cache(base, root, digest, records, rows)
    return rows, [(os.path.join(root, rel), rec[4]) for rel, rec in records.items() if rec[4]]


def _listing_digest(files: list[tuple[str, str, int, int]]) -> str:
    """One hash of every YAML's (path, size, mtime_ns): equal digests, unchanged folder."""
    text = "".join(f"{rel}\0{size}\0{mtime}\n" for rel, _path, size, mtime in files)
    return xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogateescape"))


def _walk(root: str) -> list[tuple[str, str, int, int]]:
    """(relative path, real path, size, mtime_ns) of each ``*.yaml`` under ``root``, sorted.

    Below ``root``, hidden folders (``.hydra``, ``.git``, ``.venv``), run and sweep folders and
    virtual environments are not task folders and are skipped: a run folder inside a task folder
    (``hydra.run.dir=T/a``, or ``outputs/`` under ``include_path=[.]``) must not be read as tasks.
    """
    out: list[tuple[str, str, int, int]] = []
    seen_dirs: set[str] = set()
    stack = [("", root)]
    while stack:
        rel_dir, real_dir = stack.pop()
        if real_dir in seen_dirs:
            continue  # a symlink loop, or a folder linked twice
        seen_dirs.add(real_dir)
        try:
            entries = list(os.scandir(real_dir))
        except OSError:
            continue
        if rel_dir and any(e.name in _NOT_TASK_FOLDER_MARKERS for e in entries):
            log.debug("%s: a run folder or virtual environment, not indexed", real_dir)
            continue
        for e in entries:
            if e.name.endswith(".yaml") and e.is_file():
                st = e.stat()
                real = os.path.realpath(e.path) if e.is_symlink() else e.path
                out.append((rel_dir + e.name, real, st.st_size, st.st_mtime_ns))
            elif e.is_dir() and not e.name.startswith(".") and e.name not in _IGNORE_DIRS:
                sub = os.path.realpath(e.path) if e.is_symlink() else e.path
                stack.append((rel_dir + e.name + "/", sub))
    out.sort()
    return out


def _deps_fresh(deps: list[list[Any]]) -> bool:
    """True when every file included from the folder's YAMLs has its recorded size and mtime."""
    return all(_stat(path) == (size, mtime) for path, size, mtime in deps)


def _old_records(cached: Mapping[str, Any], side: Mapping[str, Any]) -> dict[str, Record]:
    """Per-file records of the last build, when its two cache files belong together."""
    if not cached or not side or side.get("token") != cached.get("token"):
        return {}
    deps = cached["deps"]
    return {
        rel: [size, mtime, [deps[i] for i in dep_ids], found, error]
        for rel, size, mtime, dep_ids, found, error in side["files"]
    }


def _reusable(record: Record, size: int, mtime: int, stats: dict[str, tuple[int, int]]) -> bool:
    """Whether a file's old record still holds: same stat, includes unchanged, no error."""
    if (record[0], record[1]) != (size, mtime) or record[4]:
        return False  # failed files are always re-read: what they include may exist now
    for dep, dep_size, dep_mtime in record[2]:
        if dep not in stats:
            stats[dep] = _stat(dep)
        if stats[dep] != (dep_size, dep_mtime):
            return False
    return True


def _stat(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)


def _scan_file(path: str, size: int, mtime: int, memo: dict[str, Any]) -> Record:
    """Classify one YAML; a file lm-eval would skip gets a record with the reason instead."""
    from evalflow.taskspec.format.loader import read_header  # yaml is imported only when a file changed

    try:
        header, files = read_header(path, memo)
        return [size, mtime, [[d, *_stat(d)] for d in sorted(files - {path})], _classify(header), None]
    except TaskError as exc:
        return [size, mtime, [], [], str(exc)]
    except Exception as exc:  # lm-eval skips such files; they must not stop listing the others
        return [size, mtime, [], [], f"{path}: {type(exc).__name__}: {exc}"]


def _classify(header: Mapping[str, Any]) -> list[list[Any]]:
    kind = kind_of(header)
    tags = _tag_list(header.get("tag"))
    if kind in ("task", "python"):
        name = header.get("task")
        return [["task", name, tags, None, kind == "python"]] if isinstance(name, str) else []
    if kind == "group":
        name = header["group"]
        return [["group", name, [], None, False]] if isinstance(name, str) else []
    if kind == "task_list":
        out = []
        for i, item in enumerate(header["task_list"]):
            if isinstance(item, Mapping) and isinstance(item.get("task"), str):
                item_tags = _tag_list(item["tag"]) if "tag" in item else tags
                out.append(["task", item["task"], item_tags, i, False])
        return out
    return []


def _tag_list(value: Any) -> list[str]:
    if value is None:
        return []
    tags = [value] if isinstance(value, str) else value
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise TaskError(f"`tag:` must be a name or a list of names, got {value!r}")
    return list(tags)


def _root_rows(records: Mapping[str, Record]) -> list[Row]:
    """One folder's names, lm-eval's way: the first use of a name (in path order) keeps it."""
    found: dict[str, Row] = {}
    tags: dict[str, list[str]] = {}
    for rel in sorted(records):
        for kind, name, entry_tags, item, python in records[rel][3]:
            if name in found:
                log.debug("%s: '%s' is already a %s; skipping", rel, name, found[name][1])
                continue
            found[name] = [name, kind, rel, item, python, []]
            for tag in entry_tags if kind == "task" else ():
                if tag not in found:
                    found[tag] = [tag, "tag", "", None, False, []]
                    tags[tag] = []
                if found[tag][1] == "tag":
                    tags[tag].append(name)
    for tag, members in tags.items():
        found[tag][5] = sorted(set(members))
    return list(found.values())


# ----------------------------------------------------------------------------- cache files


def _read_json(path: Path, root: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT or data.get("root") != root:
        return {}
    return data


def _write_cache(base: Path, root: str, digest: str, records: Mapping[str, Record], rows: list[Row]) -> None:
    """Two files: what a warm build reads, and the per-file records an incremental one needs.

    The warm file holds the listing digest, the included files (stored once: most YAMLs include
    the same templates), the skipped files and the rows. A shared token ties the two files
    together; each is replaced atomically.
    """
    table: dict[str, int] = {}
    deps: list[list[Any]] = []
    files = []
    for rel, (size, mtime, file_deps, found, error) in records.items():
        ids = []
        for dep in file_deps:  # [path, size, mtime_ns] as stat'ed when the file was read
            if dep[0] not in table:
                table[dep[0]] = len(deps)
                deps.append(dep)
            ids.append(table[dep[0]])
        files.append([rel, size, mtime, ids, found, error])
    head = {"format": INDEX_FORMAT, "root": root, "token": uuid.uuid4().hex}
    problems = [[rel, record[4]] for rel, record in records.items() if record[4]]
    warm = {**head, "listing": digest, "deps": deps, "problems": problems, "rows": rows}
    try:
        base.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(base.with_suffix(".records.json"), {**head, "files": files})
        _atomic_write(base.with_suffix(".json"), warm)
    except OSError as exc:  # an unwritable cache only costs speed
        log.debug("cannot write the task index cache %s: %s", base, exc)


def _atomic_write(path: Path, payload: Mapping[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".index-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(payload, separators=(",", ":")))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
