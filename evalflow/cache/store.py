"""The content-addressed store: diskcache (SQLite + files) holding codec-encoded values.

diskcache is safe across processes and threads (SQLite transactions), so parallel sweeps can share
one folder. Its default ``Disk`` unpickles values; :class:`DataDisk` refuses pickle in both
directions, so a cache folder received from someone else cannot run code here.

Every entry is tagged with the stage (or ``request``) that wrote it, which is what
``python -m evalflow cache stats`` groups by.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import diskcache
from diskcache.core import MODE_PICKLE

from evalflow.cache.codec import CorruptEntry, decode, encode

log = logging.getLogger(__name__)

MISSING: Any = object()


class DataDisk(diskcache.Disk):
    """A diskcache Disk that stores bytes and str keys only and never unpickles."""

    def put(self, key: Any) -> Any:
        if not isinstance(key, str):
            raise TypeError("evalflow cache keys are strings")
        return super().put(key)

    def get(self, key: Any, raw: bool) -> Any:
        if not raw:
            raise CorruptEntry("a cache key was stored pickled; refusing to unpickle it")
        return super().get(key, raw)

    def store(self, value: Any, read: bool, key: Any = diskcache.core.UNKNOWN) -> Any:
        if not isinstance(value, bytes):
            raise TypeError("evalflow cache values are encoded bytes")
        return super().store(value, read, key=key)

    def fetch(self, mode: int, filename: str | None, value: Any, read: bool) -> Any:
        if mode == MODE_PICKLE:
            raise CorruptEntry("a cache value was stored pickled; refusing to unpickle it")
        return super().fetch(mode, filename, value, read)


def default_cache_dir() -> Path:
    """``$EVALFLOW_CACHE``, else the user cache dir (``$XDG_CACHE_HOME`` or ``~/.cache``)."""
    env = os.environ.get("EVALFLOW_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "evalflow"


class CacheStore:
    """Get and put decoded values by key; corrupt entries are reported once, dropped and missed."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory).expanduser()
        self.directory.mkdir(parents=True, exist_ok=True)
        self._cache = diskcache.Cache(
            str(self.directory),
            disk=DataDisk,
            tag_index=True,
            size_limit=2**62,  # never evict on its own: `evalflow cache gc` does that explicitly
            eviction_policy="none",
            timeout=60,
        )
        self.corrupt: list[str] = []

    def get(self, key: str) -> Any:
        try:
            blob = self._cache.get(key, default=None, retry=True)
        except CorruptEntry as exc:
            return self._drop(key, exc)
        if blob is None:
            return MISSING
        try:
            return decode(blob)
        except CorruptEntry as exc:
            return self._drop(key, exc)

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        """The values present among ``keys`` (missing and corrupt ones are left out)."""
        found = {}
        for key in keys:
            value = self.get(key)
            if value is not MISSING:
                found[key] = value
        return found

    def put(self, key: str, value: Any, tag: str) -> None:
        self._cache.set(key, encode(value), tag=tag, retry=True)

    def put_many(self, items: Mapping[str, Any], tag: str) -> None:
        """Write ``items`` in one transaction: all of a batch is persisted, or none of it."""
        encoded = {k: encode(v) for k, v in items.items()}
        with self._cache.transact(retry=True):
            for key, blob in encoded.items():
                self._cache.set(key, blob, tag=tag, retry=True)

    def _drop(self, key: str, exc: Exception) -> Any:
        if key not in self.corrupt:
            log.warning("cache entry %s in %s is corrupt (%s); recomputing it", key, self.directory, exc)
            self.corrupt.append(key)
        try:
            self._cache.delete(key, retry=True)
        except CorruptEntry:
            pass
        return MISSING

    @property
    def raw(self) -> diskcache.Cache:
        """The underlying diskcache, for maintenance commands (stats, verify, gc)."""
        return self._cache

    def close(self) -> None:
        self._cache.close()
