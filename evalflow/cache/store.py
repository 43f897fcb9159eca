"""The content-addressed store: diskcache (SQLite + files) holding codec-encoded values.

diskcache is safe across processes and threads (SQLite transactions), so parallel sweeps can share
one folder. Its default ``Disk`` unpickles values; :class:`DataDisk` refuses pickle in both
directions, so a cache folder received from someone else cannot run code here, and it only ever
reads or deletes value files named the way diskcache names them, inside the cache folder.

Entries are immutable: a key is a hash of everything its value depends on, so a value that is
already present is never replaced (``add``, not ``set``), and a reader never races a writer
swapping the value file under it. Every entry is tagged with the stage (or ``request``) that wrote
it, which is what ``python -m evalflow cache stats`` groups by.

Leases (:meth:`CacheStore.claim`) let processes sharing a folder split the model's work: a
process computes only requests it holds a lease on. A lease dies with its process: on the same
host that is seen at once (its pid is gone); a holder on another host (a container, a machine
sharing the folder) keeps a *heartbeat* entry alive while it computes (:meth:`heartbeat`), and
its leases die when the heartbeat stops, within ``HEARTBEAT_TTL`` seconds, not the lease's ttl.
The folder itself must be on a local disk (:mod:`evalflow.cache.filesystem`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import re
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import diskcache
from diskcache.core import DEFAULT_SETTINGS, MODE_PICKLE

from evalflow.cache.batch import add_many, fetch_many
from evalflow.cache.codec import CorruptEntry, decode, decode_verified, encode, encode_text, verified, verified_text
from evalflow.cache.filesystem import refuse_network_filesystem
from evalflow.cache.leases import LEASE, Mine, Row, delete_rows, holders, live_rows
from evalflow.errors import CacheError

log = logging.getLogger(__name__)

MISSING: Any = object()
ALIVE = "alive:"  # + holder token: the heartbeat of a process holding leases
HEARTBEAT_TTL = 30.0  # a holder on another host is dead this long after its last beat
# diskcache's own value-file names (Disk.filename): two hex folder levels, 28 hex digits, .val
VALUE_FILE = re.compile(r"[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{28}\.val")
# The SQLite pragmas diskcache would otherwise take from the folder's own Settings table.
_PINNED = {k: v for k, v in DEFAULT_SETTINGS.items() if k.startswith(("sqlite_", "disk_"))}


class DataDisk(diskcache.Disk):  # type: ignore[misc]  # diskcache ships no types: its Disk is Any
    """A diskcache Disk that stores bytes and str keys only, never unpickles, and touches only
    value files inside the cache folder (a shared cache.db cannot point it at other files)."""

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
        if filename is not None and not VALUE_FILE.fullmatch(filename):
            raise CorruptEntry(f"its value file name {filename!r} is not one diskcache writes; refusing to read it")
        try:
            return super().fetch(mode, filename, value, read)
        except FileNotFoundError:  # entries are never replaced, so a missing file is damage
            raise CorruptEntry(f"its value file {filename} is missing") from None

    def remove(self, file_path: str) -> None:
        if VALUE_FILE.fullmatch(file_path or ""):
            super().remove(file_path)
        else:
            log.warning("not deleting %r: not a value file name diskcache writes", file_path)


def default_cache_dir() -> Path:
    """``$EVALFLOW_CACHE``, else the user cache dir (``$XDG_CACHE_HOME`` or ``~/.cache``)."""
    env = os.environ.get("EVALFLOW_CACHE")
    if env:
        return Path(env).expanduser()
    return user_cache_dir()


def weights_dir() -> Path:
    """Where models keep converted weights (a GGUF file dequantized), shared by every cache folder:
    ``$EVALFLOW_WEIGHTS_DIR``, else ``gguf-weights/`` in the user's evalflow cache folder."""
    env = os.environ.get("EVALFLOW_WEIGHTS_DIR")
    return Path(env).expanduser() if env else user_cache_dir() / "gguf-weights"


def user_cache_dir() -> Path:
    """evalflow's folder in the user cache dir (``$XDG_CACHE_HOME`` or ``~/.cache``), whatever
    ``$EVALFLOW_CACHE`` says: the home of things shared by every cache folder (converted weights)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "evalflow"


@dataclass(frozen=True)
class Holder:
    """Who holds a lease: a process on a host (``token`` tells two holders in one process apart)."""

    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    token: str = field(default_factory=lambda: uuid.uuid4().hex)

    def as_data(self) -> dict[str, Any]:
        return {"host": self.host, "pid": self.pid, "token": self.token}


@dataclass(frozen=True)
class Claim:
    """One pass of :meth:`CacheStore.claim` over a list of keys."""

    found: dict[str, Any]  # keys whose value is (now) in the cache
    claimed: list[str]  # keys leased to the caller: compute them, then put_many (or release)
    busy: list[str]  # keys leased to another live process: ask again later
    scanned: int  # how many keys from the front of the list this pass looked at


def lease_alive(lease: Any, beating: Callable[[str], bool]) -> bool:
    """Whether a lease's holder may still be computing: its process is alive (same host), or, on
    another host, ``beating(token)`` says its heartbeat entry is still there."""
    if not isinstance(lease, Mapping) or not isinstance(lease.get("pid"), int):
        return False
    if lease.get("host") != socket.gethostname():
        return isinstance(lease.get("token"), str) and beating(lease["token"])
    try:
        os.kill(lease["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def unusable(directory: Path, exc: BaseException) -> CacheError:
    """The error for a cache folder that cannot be opened or whose index (cache.db) is damaged:
    single entries are recomputed, but a damaged index cannot be trusted at all."""
    return CacheError(
        f"the cache folder {directory} cannot be used ({type(exc).__name__}: {exc}). It must be a "
        f"writable folder; if its index {directory / 'cache.db'} is damaged, move the folder away or "
        "delete it (the next run starts a new cache there), or pass another cache_dir=."
    )


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _guarded(method: Callable[Concatenate[CacheStore, _P], _R]) -> Callable[Concatenate[CacheStore, _P], _R]:
    """SQLite failures (a damaged cache.db, a read-only folder) as a CacheError, not a traceback."""

    @functools.wraps(method)
    def wrapper(self: CacheStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise unusable(self.directory, exc) from exc

    return wrapper


class CacheStore:
    """Get and put decoded values by key; corrupt entries are reported once, dropped and missed."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory).expanduser()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            refuse_network_filesystem(self.directory)
            self._cache = diskcache.Cache(
                str(self.directory),
                disk=DataDisk,
                tag_index=True,
                size_limit=2**62,  # never evict on its own: `evalflow cache gc` does that explicitly
                eviction_policy="none",
                timeout=60,
                **_PINNED,
            )
        except (OSError, sqlite3.Error) as exc:
            raise unusable(self.directory, exc) from exc
        self.corrupt: list[str] = []
        self._mine = Mine()  # the lease rows this process wrote, and their open requests
        self._lease_rows: dict[str, Row] = {}  # lease rows read, decoded (see leases.live_rows)

    @_guarded
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

    @_guarded
    def get_deferred(self, key: str) -> Callable[[], Any] | Any:
        """MISSING, or a function returning ``key``'s value: the entry is read and its checksum
        checked now (a damaged entry is a miss now, not later), the value decoded on the first
        call (MISSING then only if its verified payload still fails to parse)."""
        try:
            blob = self._cache.get(key, default=None, retry=True)
            if blob is None:
                return MISSING
            blob = verified(blob)
        except CorruptEntry as exc:
            return self._drop(key, exc)
        return functools.partial(self._decoded, key, blob, decode_verified)

    @_guarded
    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        """The values present among ``keys`` (missing and corrupt ones are left out), read with
        one SQLite statement per 900 keys rather than one lookup per key."""
        found = {}
        for key, blob in fetch_many(self._cache, keys).items():
            value = self._drop(key, blob) if isinstance(blob, CorruptEntry) else self._decoded(key, blob)
            if value is not MISSING:
                found[key] = value
        return found

    def _decoded(self, key: str, blob: bytes, decoder: Callable[[bytes], Any] = decode) -> Any:
        """The entry's value, or MISSING after dropping it when it does not decode."""
        try:
            return decoder(blob)
        except CorruptEntry as exc:
            return self._drop(key, exc)

    @_guarded
    def put(self, key: str, value: Any, tag: str, replace: bool = False) -> None:
        """Store ``value`` under ``key``; an entry already there is kept unless ``replace`` (a
        recomputed stage's output written over the one the run did not read)."""
        (self._cache.set if replace else self._cache.add)(key, encode(value), tag=tag, retry=True)

    @_guarded
    def get_text_bytes(self, key: str) -> bytes | memoryview | Any:
        """A stored string as UTF-8 bytes, for a file (an ``EVFT`` entry's bytes as stored, no
        decoding or copying); MISSING when absent, corrupt or not a string."""
        try:
            blob = self._cache.get(key, default=None, retry=True)
            if blob is None:
                return MISSING
            payload = verified_text(blob)
            if payload is None:  # a string an older evalflow stored as JSON
                value = decode(blob)
                return value.encode("utf-8") if isinstance(value, str) else MISSING
        except (CorruptEntry, UnicodeEncodeError) as exc:
            return self._drop(key, exc)
        return payload

    @_guarded
    def put_text(self, key: str, data: bytes, tag: str, replace: bool = False) -> None:
        """Store a string given as its UTF-8 bytes, as they are (an ``EVFT`` entry: no JSON
        escaping); ``replace`` as for :meth:`put`."""
        (self._cache.set if replace else self._cache.add)(key, encode_text(data), tag=tag, retry=True)

    @_guarded
    def put_encoded(self, key: str, blob: bytes, tag: str | None) -> bool:
        """Add an already encoded (and verified) value, as ``cache merge`` copies it; False if
        the key was present (entries are immutable, so nothing is replaced)."""
        return bool(self._cache.add(key, blob, tag=tag, retry=True))

    @_guarded
    def put_many(self, items: Mapping[str, Any], tag: str, replace: bool = False) -> None:
        """Write ``items`` in one transaction (all of a batch is persisted, or none of it), and end
        this process's leases whose every request is now persisted (in the same transaction);
        ``replace``: over the entries present (answers recomputed by a run that did not read them)."""
        encoded = {k: encode(v) for k, v in items.items()}
        done, forget = self._mine.finished(encoded)
        with self._cache.transact(retry=True):
            add_many(self._cache, encoded, tag, replace=replace)
            delete_rows(self._cache, done)
        forget()

    @_guarded
    def claim(self, keys: Iterable[str], holder: Holder, limit: int, ttl: float) -> Claim:
        """Take keys from ``keys`` in order, in one transaction, until ``limit`` of them are leased
        to ``holder`` (those with neither a value nor a live lease), with one lease row for all of
        them (:mod:`evalflow.cache.leases`); the others are reported as found or busy. An
        iterator is left at the first key not looked at. Keys are looked at in batches of at most
        the leases still wanted, each with a few statements (not a few per key)."""
        found: dict[str, Any] = {}
        claimed: list[str] = []
        busy: list[str] = []
        scanned = 0
        remaining = iter(keys)
        with self._cache.transact(retry=True):
            held = holders(live_rows(self._cache, self._lease_rows), lambda h: lease_alive(h, self.beating))
            dead: set[str] = set()
            mine: set[str] = set()
            while len(claimed) < limit:
                batch = list(dict.fromkeys(itertools.islice(remaining, limit - len(claimed))))
                if not batch:
                    break
                scanned += len(batch)
                found.update(self.get_many(batch))
                for key in (k for k in batch if k not in found):
                    row, live = held.get(key, (None, False))
                    if key in mine:  # named twice: leased once
                        continue
                    if live:
                        busy.append(key)
                        continue
                    claimed.append(key)
                    mine.add(key)
                    if row is not None:  # a dead or damaged lease: taken over
                        dead.add(row.key)
            delete_rows(self._cache, dead)
            if claimed:
                self._mine.write(self._cache, holder.as_data(), claimed, ttl)
        self._mine.drop(dead)
        return Claim(found, claimed, busy, scanned)

    @_guarded
    def leased(self) -> dict[str, Row]:
        """Each request under an unexpired lease, with its lease row (holder and requests)."""
        return {key: row for row in live_rows(self._cache, {}) for key in row.keys}

    def beating(self, token: str) -> bool:
        """Whether the holder ``token`` beat within the last ``HEARTBEAT_TTL`` seconds."""
        return self._cache.get(ALIVE + token, default=None, retry=True) is not None

    @contextlib.contextmanager
    def heartbeat(self, holder: Holder, ttl: float = HEARTBEAT_TTL) -> Iterator[None]:
        """Keep ``holder``'s heartbeat entry alive (re-written every ``ttl / 3`` s by a daemon
        thread) while the block runs, so processes on other hosts see its leases as live; a
        holder that dies stops beating and its leases are free ``ttl`` seconds later."""
        stop = threading.Event()
        key, blob = ALIVE + holder.token, encode({"host": holder.host, "pid": holder.pid, "at": time.time()})

        def beat() -> None:
            while not stop.wait(ttl / 3):
                try:
                    self._cache.set(key, blob, expire=ttl, tag="lease", retry=True)
                except Exception as exc:  # a beat lost now is retried at the next one
                    log.debug("heartbeat not written: %s", exc)

        self._cache.set(key, blob, expire=ttl, tag="lease", retry=True)  # before any lease is taken
        beating = threading.Thread(target=beat, name="evalflow-heartbeat", daemon=True)
        beating.start()
        try:
            yield
        finally:
            stop.set()
            beating.join()
            self._cache.delete(key, retry=True)

    @_guarded
    def release(self, keys: Iterable[str]) -> None:
        """End leases without a value (the computation failed): others may take the keys. This
        process's rows covering any of them go whole (their other requests were persisted, or
        are released too); a per-request row of an older evalflow goes too."""
        keys = list(keys)
        rows = self._mine.covering(keys)
        with self._cache.transact(retry=True):
            delete_rows(self._cache, rows + [LEASE + k for k in keys])
        self._mine.drop(rows)

    @_guarded
    def check(self, key: str) -> str | None:
        """Why the entry ``key`` is unusable (checksum, schema, missing file), or None if it decodes."""
        try:
            blob = self._cache.get(key, default=None, retry=True)
            if blob is None:
                return None  # deleted meanwhile (gc, or a corrupt entry dropped by a run)
            decode(blob)
        except CorruptEntry as exc:
            return str(exc)
        return None

    def drop_corrupt(self, key: str, exc: Exception) -> Any:
        """Report ``key``'s entry as corrupt (once), delete it and return MISSING: it is recomputed."""
        return self._drop(key, exc)

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
