"""Looking after a cache folder: what ``python -m evalflow cache stats|verify|gc|clear`` do.

    stats    entries and bytes per stage (and per-request responses)
    verify   decode every entry and check its checksum
    gc       drop leases of dead processes and value files no entry points to (left by killed
             runs), entries older than max_age_days=N, then the oldest entries until the folder
             is under max_size_gb=X
    clear    delete every entry, and the side folders (models' file memos such as gguf-weights/)

Besides diskcache's entries, a cache folder holds *side folders*: memos that models keep as plain
files (a GGUF file's dequantized weights, its metadata). ``stats`` lists them, ``gc`` removes
their half-written ``*.tmp-*`` folders left by killed runs, ``clear`` removes them.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from evalflow.cache.codec import CorruptEntry, decode
from evalflow.cache.leases import LEASE
from evalflow.cache.store import VALUE_FILE, CacheStore, lease_alive, weights_dir


def clear_files(directory: Path) -> list[Path]:
    """evalflow's own files in a cache folder, removed without opening the index: the SQLite index
    and its journals, diskcache's value files, side folders. Anything else is left alone."""
    removed: list[Path] = []
    for name in ("cache.db", "cache.db-wal", "cache.db-shm", "cache.db-journal"):
        if (directory / name).exists():
            (directory / name).unlink()
            removed.append(directory / name)
    for path in directory.glob("[0-9a-f][0-9a-f]/[0-9a-f][0-9a-f]/*.val"):
        if VALUE_FILE.fullmatch(path.relative_to(directory).as_posix()):
            path.unlink()
            removed.append(path)
    for level2 in sorted(directory.glob("[0-9a-f][0-9a-f]/[0-9a-f][0-9a-f]"), reverse=True):
        for folder in (level2, level2.parent):
            with contextlib.suppress(OSError):  # only empty folders go
                folder.rmdir()
    for folder in side_folders(directory):
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _rows(store: CacheStore) -> list[tuple[int, str, str | None, int, float]]:
    """(rowid, key, tag, bytes, store_time) of every entry; bytes count inline and file values."""
    sql = store.raw._sql  # diskcache's own connection; read-only queries
    rows: list[tuple[int, str, str | None, int, float]] = sql(
        "SELECT rowid, key, tag, size + COALESCE(LENGTH(value), 0), store_time FROM Cache"
    ).fetchall()
    return rows


@dataclass(frozen=True)
class Footprint:
    """What a cache folder holds (``stats``): its entries by stage tag, its side folders, and the
    shared converted weights when they lie outside it (so they are not counted twice)."""

    directory: Path
    folder_bytes: int  # everything in the folder: index, journals, value files, side folders
    entries: Mapping[str, tuple[int, int]]  # tag → (entries, bytes), sorted by tag
    side_folders: tuple[tuple[str, int, int], ...]  # (name, files, bytes)
    shared_weights: tuple[Path, int] | None  # (EVALFLOW_WEIGHTS_DIR, bytes)


def stats(store: CacheStore) -> Footprint:
    counts: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for _, _, tag, size, _ in _rows(store):
        name = tag or "?"
        counts[name] = counts.get(name, 0) + 1
        sizes[name] = sizes.get(name, 0) + (size or 0)
    folders = []
    for folder in side_folders(store.directory):
        files = [p for p in folder.rglob("*") if p.is_file()]
        folders.append((folder.name, len(files), sum(p.stat().st_size for p in files)))
    shared = weights_dir()
    outside = shared.is_dir() and store.directory.resolve() not in shared.resolve().parents
    return Footprint(
        store.directory,
        folder_bytes(store.directory),
        {t: (counts[t], sizes[t]) for t in sorted(counts)},
        tuple(folders),
        (shared, folder_bytes(shared)) if outside else None,
    )


def folder_bytes(path: Path) -> int:
    """Bytes of every file under ``path``: the index, its journals, value files and side folders."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def memos(directory: Path) -> list[tuple[float, Path]]:
    """(last use, folder) of every finished memo in the side folders: ``gc``'s other evictable items."""
    return [
        ((m / "memo.json").stat().st_mtime, m)
        for folder in side_folders(directory)
        for m in folder.iterdir()
        if m.is_dir() and (m / "memo.json").is_file()
    ]


def side_folders(directory: Path) -> list[Path]:
    """Sub-folders that are not diskcache's own two-hex-digit value folders."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_dir() and not re.fullmatch(r"[0-9a-f]{2}", p.name))


def verify(store: CacheStore) -> tuple[int, list[tuple[str, str]]]:
    """How many entries were checked, and (key, what is wrong) for each corrupt one."""
    rows = _rows(store)
    return len(rows), [(key, why) for _, key, _, _, _ in rows if (why := store.check(key)) is not None]


@dataclass(frozen=True)
class Collected:
    """What ``gc`` removed, and the bytes the folder holds after it."""

    entries: int
    orphans: int  # value files no entry named
    temporaries: int  # half-written memo files and folders
    memos: int
    bytes_left: int


def gc(store: CacheStore, max_age_days: float | None = None, max_size_gb: float | None = None) -> Collected:
    """Drop dead leases and orphans, then entries older than ``max_age_days``, then the oldest
    entries and memos until the folder is under ``max_size_gb``."""
    removed = 0
    for _, key, _, _, _ in _rows(store):
        if key.startswith(LEASE) and not _live_lease(store, key) and store.raw.delete(key, retry=True):
            removed += 1
    orphans = _orphan_files(store)
    for path in orphans:
        path.unlink(missing_ok=True)
    temporaries = _sweep_memo_temporaries(store.directory)
    removed_memos = 0
    if max_age_days is not None:
        cutoff = time.time() - max_age_days * 86400
        for _, key, _, _, stored in _rows(store):
            if stored < cutoff and store.raw.delete(key, retry=True):
                removed += 1
    if max_size_gb is not None:
        removed_entries, removed_memos = _bound_size(store, max_size_gb * 1e9)
        removed += removed_entries
    return Collected(removed, len(orphans), temporaries, removed_memos, folder_bytes(store.directory))


def _bound_size(store: CacheStore, budget: float) -> tuple[int, int]:
    """Remove the least recently stored entries and least recently used memos, oldest first, until
    everything the folder holds fits in ``budget`` bytes; (entries, memos) removed. SQLite keeps
    its file's size after a delete (its pages are reused), so an entry counts as its value's bytes."""
    entries: list[tuple[float, str, str | Path, int]] = [
        (stored, "entry", key, size or 0) for _, key, _, size, stored in _rows(store) if not key.startswith(LEASE)
    ]
    kept: list[tuple[float, str, str | Path, int]] = [
        (used, "memo", path, folder_bytes(path)) for used, path in memos(store.directory)
    ]
    removed = {"entry": 0, "memo": 0}
    total = folder_bytes(store.directory)
    for _, kind, item, size in sorted(entries + kept, key=lambda i: i[0]):
        if total <= budget:
            break
        if kind == "memo":
            shutil.rmtree(item, ignore_errors=True)
        elif not store.raw.delete(item, retry=True):
            continue
        removed[kind] += 1
        total -= size
    return removed["entry"], removed["memo"]


def _sweep_memo_temporaries(directory: Path, min_age: float = 3600.0) -> int:
    """Delete the ``*.tmp-*`` files and folders of side folders left by killed runs (older than
    ``min_age`` seconds, so a memo being written right now is left alone); return how many."""
    cutoff, swept = time.time() - min_age, 0
    for folder in side_folders(directory):
        for tmp in folder.glob("*.tmp-*"):
            if tmp.stat().st_mtime < cutoff:
                shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink(missing_ok=True)
                swept += 1
    return swept


def _orphan_files(store: CacheStore, min_age: float = 3600.0) -> list[Path]:
    """Value files no entry names: a run killed between writing a value file and recording it.
    Only files older than ``min_age`` seconds, so a value being written right now is left alone."""
    named = {name for (name,) in store.raw._sql("SELECT filename FROM Cache WHERE filename IS NOT NULL")}
    cutoff = time.time() - min_age
    return [
        path
        for path in store.directory.glob("[0-9a-f][0-9a-f]/[0-9a-f][0-9a-f]/*.val")
        if path.relative_to(store.directory).as_posix() not in named and path.stat().st_mtime < cutoff
    ]


def _live_lease(store: CacheStore, key: str) -> bool:
    try:
        blob = store.raw.get(key, retry=True)
        return blob is not None and lease_alive(decode(blob), store.beating)
    except CorruptEntry:
        return False


def drop_stage(store: CacheStore, stage: str) -> int:
    """Delete every entry one stage wrote (its tag), of every task and run, and nothing else; how
    many. lm-eval's ``--cache_requests delete`` drops the ``instances`` stage this way."""
    return int(store.raw.evict(stage, retry=True))


def clear(store: CacheStore) -> tuple[int, list[str]]:
    """Every entry and side folder removed: how many entries, and the side folders' names."""
    folders = side_folders(store.directory)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    return store.raw.clear(retry=True), [f.name for f in folders]
