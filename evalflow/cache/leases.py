"""Leases as rows of the cache's own table: one row per claim (a chunk of requests), not per request.

A lease row's key is ``lease:`` + a fresh id, its value the holder (``host``, ``pid``, ``token``)
and ``keys``, the requests it covers; it expires after the claim's ttl. A row is written once and
never changed: it is deleted when every request it covers is persisted (in the transaction that
persists the last of them), released, or taken over once its holder is dead. One row per chunk of
some hundreds of requests replaces a row written and deleted per request (two of the three row
writes per request of a cold run, each with diskcache's index and trigger updates).

A row without ``keys`` (what evalflow wrote before, or a test) covers the one request its key
names after ``lease:``, so such rows are honoured and taken over as ever.

Every function that reads or writes rows runs inside the caller's ``cache.transact()``; which rows
this process wrote and which of their requests are still open is kept in memory (:class:`Mine`),
behind a lock, since a served model's chunks are claimed by a feeder thread and persisted by the
main one.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import diskcache

from evalflow.cache.batch import add_many, delete_many
from evalflow.cache.codec import CorruptEntry, decode, encode

LEASE = "lease:"
_END = "lease;"  # the first string after every "lease:..." key (";" follows ":")


@dataclass(frozen=True)
class Row:
    """A stored lease: its row key, its holder's data (None when unreadable) and the requests it covers."""

    key: str
    holder: Any
    keys: tuple[str, ...]


def live_rows(cache: diskcache.Cache, memo: dict[str, Row]) -> list[Row]:
    """Every unexpired lease row. ``memo`` keeps rows with ``keys`` decoded (written once, never
    changed), so a row is parsed once per process however many claims read it."""
    rows = cache._sql(
        "SELECT key, mode, filename, value FROM Cache WHERE key > ? AND key < ? AND raw = 1"
        " AND (expire_time IS NULL OR expire_time > ?)",
        (LEASE, _END, time.time()),
    ).fetchall()
    out = []
    for key, mode, filename, value in rows:
        row = memo.get(key)
        if row is None:
            data = _fetched(cache, mode, filename, value)
            row = _row(key, data)
            if isinstance(data, Mapping) and "keys" in data:  # a row of one claim: never rewritten
                memo[key] = row
        out.append(row)
    for gone in set(memo) - {row.key for row in out}:
        del memo[gone]
    return out


def _fetched(cache: diskcache.Cache, mode: int, filename: str | None, value: Any) -> Any:
    try:
        return decode(cache.disk.fetch(mode, filename, value, False))
    except (CorruptEntry, OSError):
        return None


def _row(key: str, data: Any) -> Row:
    keys = data.get("keys") if isinstance(data, Mapping) else None
    if isinstance(keys, list) and all(isinstance(k, str) for k in keys):
        holder = {k: v for k, v in data.items() if k != "keys"}
        return Row(key, holder, tuple(keys))
    return Row(key, data, (key[len(LEASE) :],))


def holders(rows: Iterable[Row], alive: Callable[[Any], bool]) -> dict[str, tuple[Row, bool]]:
    """Per leased request, its row and whether the row's holder is alive (asked once per row)."""
    out: dict[str, tuple[Row, bool]] = {}
    for row in rows:
        live = alive(row.holder)
        for key in row.keys:
            if key not in out or live:
                out[key] = (row, live)
    return out


@dataclass
class Mine:
    """The lease rows this process wrote and, per row, its requests not yet persisted."""

    open: dict[str, set[str]] = field(default_factory=dict)
    row_of: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def write(self, cache: diskcache.Cache, holder: Mapping[str, Any], keys: list[str], ttl: float) -> None:
        """One row leasing ``keys`` to ``holder``."""
        row = LEASE + uuid.uuid4().hex
        add_many(cache, {row: encode({**holder, "keys": keys})}, tag="lease", expire=ttl)
        with self.lock:
            self.open[row] = set(keys)
            self.row_of.update((k, row) for k in keys)

    def finished(self, keys: Iterable[str]) -> tuple[list[str], Callable[[], None]]:
        """The rows every open request of which is among ``keys`` (to delete now), and a function
        that forgets ``keys`` (to call once the transaction deleting them committed)."""
        keys = set(keys)
        with self.lock:
            rows = {self.row_of[k] for k in keys if k in self.row_of}
            done = [r for r in rows if self.open[r] <= keys]

        def forget() -> None:
            with self.lock:
                for key in keys:
                    row = self.row_of.pop(key, None)
                    if row is not None and row in self.open:
                        self.open[row].discard(key)
                for row in done:
                    for key in self.open.pop(row, ()):
                        self.row_of.pop(key, None)

        return done, forget

    def covering(self, keys: Iterable[str]) -> list[str]:
        """The rows of this process that cover any of ``keys``."""
        with self.lock:
            return sorted({self.row_of[k] for k in keys if k in self.row_of})

    def drop(self, rows: Iterable[str]) -> None:
        """Forget ``rows`` (deleted: released, or taken over by another process)."""
        with self.lock:
            for row in rows:
                for key in self.open.pop(row, ()):
                    self.row_of.pop(key, None)


def delete_rows(cache: diskcache.Cache, rows: Iterable[str]) -> None:
    delete_many(cache, list(rows))


__all__ = ["LEASE", "Mine", "Row", "delete_rows", "holders", "live_rows"]
