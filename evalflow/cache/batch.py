"""Many diskcache entries per SQLite statement, for the edge's per-request traffic.

diskcache's API is one key per call, and each call is several statements (a select, an insert, a
cull of expired keys): a 5-shot mmlu run made 11 statements per request, 620,000 in all, most of
its cold run. These functions read, add and delete whole lists of keys with one ``IN (...)`` select
or one ``executemany`` per 900 keys, on diskcache's own table and connection, so every other
reader (``get``, ``cache stats``, ``gc``) sees exactly what diskcache itself would have written:

- rows carry the columns ``Cache._row_insert`` writes (store time, access time, tag, size, mode,
  file name, value), and diskcache's triggers keep its ``count`` and ``size`` settings right;
- values at or above the folder's ``disk_min_file_size`` go to value files through the ``Disk``
  (:class:`~evalflow.cache.store.DataDisk`, which refuses anything but bytes), as ``add`` does;
- a present, unexpired key is never replaced (the callers' entries are immutable), except when
  the caller asks to (``replace``: a run told to recompute writes what it computed over the entry
  it did not read, so later runs read the recomputed answer; nothing else is ever removed).

Every function expects to run inside ``cache.transact()`` when it writes, so a batch is atomic.
Written against diskcache 5.6's schema (``Cache(key, raw, ...)`` with its unique ``(key, raw)``
index); ``tests/cache/test_batch.py`` checks the rows against diskcache's own reads.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence

import diskcache

from evalflow.cache.codec import CorruptEntry

BATCH = 900  # keys per statement: under SQLite's historical 999-variable limit


def _batches(keys: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(keys), BATCH):
        yield keys[start : start + BATCH]


def fetch_many(cache: diskcache.Cache, keys: Iterable[str]) -> dict[str, bytes | CorruptEntry]:
    """The stored bytes of each present, unexpired key among ``keys``; a key whose value cannot
    be read (a missing or foreign value file) maps to the CorruptEntry saying why."""
    wanted = list(dict.fromkeys(keys))
    found: dict[str, bytes | CorruptEntry] = {}
    now = time.time()
    disk = cache.disk
    for batch in _batches(wanted):
        marks = ",".join("?" * len(batch))
        rows = cache._sql(
            f"SELECT key, mode, filename, value FROM Cache WHERE raw = 1 AND key IN ({marks})"
            " AND (expire_time IS NULL OR expire_time > ?)",
            (*batch, now),
        ).fetchall()
        for key, mode, filename, value in rows:
            try:
                found[key] = disk.fetch(mode, filename, value, False)
            except CorruptEntry as exc:
                found[key] = exc
    return found


def add_many(
    cache: diskcache.Cache,
    items: Mapping[str, bytes],
    tag: str | None,
    expire: float | None = None,
    replace: bool = False,
) -> int:
    """Add the entries whose key is not present (or only expired); returns how many were added.
    An expired row of the same key is replaced, as ``Cache.add`` does; with ``replace``, a present
    one too (``Cache.set``'s semantics)."""
    if not items:
        return 0
    now = time.time()
    present, expired = _present(cache, list(items), now)
    fresh = [(k, v) for k, v in items.items() if replace or k not in present]
    # expired rows of these keys, and with ``replace`` the present ones (usually none: no statement then)
    delete_many(cache, expired + (sorted(present) if replace else []))
    disk = cache.disk
    rows = []
    for key, blob in fresh:
        size, mode, filename, value = disk.store(blob, False, key=key)
        rows.append((key, now, None if expire is None else now + expire, now, tag, size, mode, filename, value))
    cache._con.executemany(
        "INSERT INTO Cache(key, raw, store_time, expire_time, access_time, access_count, tag, size, mode,"
        " filename, value) VALUES (?, 1, ?, ?, ?, 0, ?, ?, ?, ?, ?)",
        rows,
    )
    return len(rows)


def delete_many(cache: diskcache.Cache, keys: Sequence[str]) -> None:
    """Delete ``keys`` (absent ones are ignored) and their value files, as ``Cache.delete`` does
    inside a transaction (the files go at once; the callers delete leases, which have none)."""
    for batch in _batches(list(keys)):
        marks = ",".join("?" * len(batch))
        rows = cache._sql(
            f"SELECT filename FROM Cache WHERE raw = 1 AND key IN ({marks}) AND filename IS NOT NULL", batch
        ).fetchall()
        cache._sql(f"DELETE FROM Cache WHERE raw = 1 AND key IN ({marks})", batch)
        for (filename,) in rows:
            cache.disk.remove(filename)


def _present(cache: diskcache.Cache, keys: Sequence[str], now: float) -> tuple[set[str], list[str]]:
    """The keys among ``keys`` with an unexpired row, and those with an expired one."""
    present: set[str] = set()
    expired: list[str] = []
    for batch in _batches(keys):
        marks = ",".join("?" * len(batch))
        for key, expire_time in cache._sql(
            f"SELECT key, expire_time FROM Cache WHERE raw = 1 AND key IN ({marks})", batch
        ).fetchall():
            if expire_time is None or expire_time > now:
                present.add(key)
            else:
                expired.append(key)
    return present, expired


__all__ = ["BATCH", "add_many", "delete_many", "fetch_many"]
