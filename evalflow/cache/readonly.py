"""A cache folder read without writing a byte: what the viewer shows of a run's cache.

diskcache's own ``get`` is not a pure read: it updates an entry's access time and count, culls
expired entries and deletes an entry whose value file is gone, and :class:`~evalflow.cache.store.CacheStore`
deletes a corrupt entry it meets; opening it creates the folder, its ``cache.db`` and its tables.
The viewer reads caches named by a run's manifest (``cache_dir``: text in a folder someone gave
it), so it must not change them. Here the SQLite file is opened read-only (``mode=ro``; a closed
cache's also ``immutable``, so not even SQLite's WAL side files are created), the row
read with one SELECT on diskcache's ``Cache`` table, exactly as :func:`evalflow.cache.batch.fetch_many`
reads it, and the value checked and decoded by :mod:`evalflow.cache.codec`; a value file is read
only under the names :data:`~evalflow.cache.store.VALUE_FILE` allows, inside the folder. A missing,
damaged or foreign entry is simply absent (None); nothing is dropped or logged as corrupt.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from diskcache.core import DBNAME, MODE_BINARY, MODE_RAW

from evalflow.cache.codec import CorruptEntry, decode
from evalflow.cache.store import VALUE_FILE

_ROW = "SELECT mode, filename, value FROM Cache WHERE raw = 1 AND key = ? AND (expire_time IS NULL OR expire_time > ?)"


def read_value(directory: str | os.PathLike[str], key: str) -> Any:
    """``key``'s decoded value in the cache folder ``directory``, or None when the folder, the
    entry or a readable, intact value is not there. Writes nothing, creates nothing."""
    folder = Path(directory)
    database = folder / DBNAME
    if not database.is_file():
        return None
    # diskcache keeps its database in WAL mode: a read-only reader of a closed cache would still
    # create the -wal and -shm files beside it, unless told the file is immutable. While a writer
    # has it open (its -shm is there), it is read as any reader does (the -shm is the writers'
    # and readers' shared lock table, not the cache's content), seeing the writer's last commit.
    live = database.with_name(DBNAME + "-shm").exists()
    uri = f"file:{quote(str(database.resolve()))}?mode=ro" + ("" if live else "&immutable=1")
    try:
        con = sqlite3.connect(uri, uri=True)
    except sqlite3.Error:
        return None
    try:
        row = con.execute(_ROW, (key, time.time())).fetchone()
    except sqlite3.Error:  # not a diskcache database, or locked past the timeout
        return None
    finally:
        con.close()
    blob = None if row is None else _blob(folder, *row)
    if blob is None:
        return None
    try:
        return decode(blob)
    except CorruptEntry:
        return None


def _blob(folder: Path, mode: int, filename: str | None, value: Any) -> bytes | None:
    """The stored bytes of a row: in the row itself, or in its value file (a name diskcache
    writes, resolved inside the folder)."""
    if mode == MODE_RAW and isinstance(value, bytes):
        return value
    if mode != MODE_BINARY or not filename or not VALUE_FILE.fullmatch(filename):
        return None
    root = folder.resolve()
    path = (root / filename).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        return None
    return path.read_bytes()
