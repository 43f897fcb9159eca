"""A cached text copied to a file by the kernel: a samples file out of a fully cached run.

A task's samples text is stored as an ``EVFT`` entry (its UTF-8 bytes after a checksum header,
:mod:`evalflow.cache.codec`), megabytes in a value file of its own. Reading it into memory to
check and write it costs more than the rest of a cached mmlu run's output; here the value file
is checked through a memory map and copied with ``os.copy_file_range``, so the text never passes
through this process.
"""

from __future__ import annotations

import errno
import mmap
import os
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, BinaryIO

from diskcache.core import MODE_BINARY

from evalflow.cache.codec import CorruptEntry, text_start
from evalflow.cache.store import MISSING, VALUE_FILE, CacheStore, unusable
from evalflow.errors import CacheError


@dataclass(frozen=True)
class TextFile:
    """A stored string's value file, verified and held open, and where its UTF-8 text lies in it:
    :meth:`copy_to` has the kernel copy it to a file (a samples text is megabytes)."""

    source: BinaryIO
    start: int
    size: int

    def copy_to(self, out: BinaryIO) -> None:
        """Append the text to ``out`` (its buffer flushed first), then close the value file."""
        out.flush()
        offset, left = self.start, self.size
        try:
            while left:
                try:
                    done = os.copy_file_range(self.source.fileno(), out.fileno(), left, offset)
                except OSError as exc:  # another filesystem (older kernels), or none of it supported
                    if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                        raise
                    self.source.seek(offset)
                    done = out.write(self.source.read(left))
                if not done:
                    raise CacheError(f"a cached text's value file {self.source.name} ended early")
                offset, left = offset + done, left - done
        finally:
            self.source.close()


def text_source(store: CacheStore, key: str) -> TextFile | bytes | memoryview | Any:
    """A stored string for a file: when it has a value file of its own, that file verified
    (through a memory map, not read into memory) and open as a :class:`TextFile`; else its
    bytes (:meth:`CacheStore.get_text_bytes`). MISSING when absent, corrupt or not a string."""
    try:
        row = store.raw._sql(
            "SELECT mode, filename FROM Cache WHERE key = ? AND raw = 1 AND (expire_time IS NULL OR expire_time > ?)",
            (key, time.time()),
        ).fetchone()
    except sqlite3.Error as exc:
        raise unusable(store.directory, exc) from exc
    if row is None:
        return MISSING
    mode, filename = row
    if mode != MODE_BINARY or filename is None:
        return store.get_text_bytes(key)
    if not VALUE_FILE.fullmatch(filename):
        return store.drop_corrupt(key, CorruptEntry(f"its value file name {filename!r} is not one diskcache writes"))
    try:
        source = open(store.directory / filename, "rb")  # noqa: SIM115 - TextFile.copy_to closes it
    except FileNotFoundError:
        return store.drop_corrupt(key, CorruptEntry(f"its value file {filename} is missing"))
    try:
        with mmap.mmap(source.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            start, size = text_start(mapped), len(mapped)
    except (CorruptEntry, ValueError) as exc:  # ValueError: an empty file cannot be mapped
        source.close()
        return store.drop_corrupt(
            key, exc if isinstance(exc, CorruptEntry) else CorruptEntry(f"its value file is empty ({exc})")
        )
    if start is None:
        source.close()
        return store.get_text_bytes(key)
    return TextFile(source, start, size - start)
