"""The union of cache folders: ``python -m evalflow cache merge SRC... cache_dir=DST``.

Entries are immutable and keyed by a hash of everything their value depends on, so two caches
never disagree about a key: merging is a union, conflict-free and idempotent (a key already in
DST is left as it is). It is how the node-local caches of a cluster's jobs become one cache.

Sources are read as plain files (SQLite opened read-only, value files read directly), so a source
may lie on a network file system and is never modified; only DST, on a local disk, is written.
Every entry's checksum is verified on the way: damaged entries (bad checksum, missing or foreign
value file) are skipped and counted, never copied. Leases and heartbeats are not copied: they
belong to the processes of the source's host.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from evalflow.cache.codec import CorruptEntry, decode
from evalflow.cache.leases import LEASE
from evalflow.cache.store import ALIVE, VALUE_FILE, CacheStore
from evalflow.errors import CacheError

log = logging.getLogger(__name__)

MODE_RAW, MODE_BINARY = 1, 2  # diskcache's modes for bytes stored inline / in a value file


@dataclass
class MergeCounts:
    copied: int = 0
    present: int = 0  # already in the destination
    damaged: int = 0  # failed their checksum or lost their value file: skipped


def merge(sources: list[Path], dest: CacheStore) -> MergeCounts:
    counts = MergeCounts()
    for source in sources:
        for key, tag, blob in _entries(source, counts):
            if dest.put_encoded(key, blob, tag):
                counts.copied += 1
            else:
                counts.present += 1
    return counts


def _entries(source: Path, counts: MergeCounts) -> Iterator[tuple[str, str | None, bytes]]:
    """(key, tag, encoded value) of every intact entry of ``source``; damaged ones are counted."""
    db = source / "cache.db"
    if not db.is_file():
        raise CacheError(
            f"cache merge: {source} is not an evalflow cache folder (no cache.db in it); give cache folders as sources"
        )
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            rows = conn.execute("SELECT key, tag, mode, filename, value FROM Cache").fetchall()
    except sqlite3.Error as exc:
        raise CacheError(
            f"cache merge: cannot read {db} ({exc}); copy the folder whole (cache.db with its -wal "
            "and -shm files) while no run uses it, then merge the copy"
        ) from None
    for key, tag, mode, filename, value in rows:
        if not isinstance(key, str) or key.startswith((LEASE, ALIVE)):
            continue
        try:
            blob = _read(source, mode, filename, value)
            decode(blob)
        except (CorruptEntry, OSError) as exc:
            log.warning("cache merge: skipping damaged entry %s of %s (%s)", key, source, exc)
            counts.damaged += 1
            continue
        yield key, tag, blob


def _read(source: Path, mode: int, filename: str | None, value: object) -> bytes:
    if mode == MODE_RAW and isinstance(value, bytes):
        return value
    if mode == MODE_BINARY and filename and VALUE_FILE.fullmatch(filename):
        return (source / filename).read_bytes()
    raise CorruptEntry(f"not an evalflow value (mode {mode}, file {filename!r})")
