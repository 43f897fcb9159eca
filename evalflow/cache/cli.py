"""``python -m evalflow cache stats|verify|gc|clear [cache_dir=DIR]``: look after a cache folder.

    stats    entries and bytes per stage (and per-request responses)
    verify   decode every entry and check its checksum; exit 1 when anything is corrupt
    gc       drop entries older than max_age_days=N, then the oldest until under max_size_gb=X
    clear    delete every entry
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

from evalflow.cache.codec import CorruptEntry, decode
from evalflow.cache.store import CacheStore, default_cache_dir
from evalflow.errors import ConfigError

USAGE = "usage: python -m evalflow cache stats|verify|gc|clear [cache_dir=DIR] [max_age_days=N] [max_size_gb=X]"


def _options(argv: list[str]) -> tuple[str, dict[str, str]]:
    if not argv or argv[0] not in ("stats", "verify", "gc", "clear"):
        raise ConfigError(f"unknown cache command {argv[:1]}; {USAGE}")
    opts = {}
    for arg in argv[1:]:
        key, sep, value = arg.partition("=")
        if not sep or key not in ("cache_dir", "max_age_days", "max_size_gb"):
            raise ConfigError(f"cache: cannot use argument '{arg}'; {USAGE}")
        opts[key] = value
    return argv[0], opts


def main(argv: list[str]) -> int:
    command, opts = _options(argv)
    directory = Path(opts["cache_dir"]).expanduser() if "cache_dir" in opts else default_cache_dir()
    store = CacheStore(directory)
    try:
        return {"stats": stats, "verify": verify, "gc": gc, "clear": clear}[command](store, opts)
    finally:
        store.close()


def _rows(store: CacheStore):  # (rowid, key, tag, size, access_time)
    sql = store.raw._sql  # diskcache's own connection; read-only queries
    return sql("SELECT rowid, key, tag, size, store_time FROM Cache").fetchall()


def stats(store: CacheStore, opts: dict[str, str]) -> int:
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    for _, key, tag, size, _ in _rows(store):
        counts[tag or "?"] += 1
        sizes[tag or "?"] += size or 0
    print(f"cache: {store.directory}  ({store.raw.volume() / 1e6:.1f} MB on disk)")
    for tag in sorted(counts):
        print(f"  {tag:<22} {counts[tag]:>9} entries")
    print(f"  {'total':<22} {sum(counts.values()):>9} entries")
    return 0


def verify(store: CacheStore, opts: dict[str, str]) -> int:
    bad = []
    for _, key, _, _, _ in _rows(store):
        try:
            blob = store.raw.get(key)
            decode(blob)
        except (CorruptEntry, OSError, TypeError) as exc:
            bad.append((key, exc))
    for key, exc in bad:
        print(f"corrupt: {key}: {exc}", file=sys.stderr)
    print(f"verified {len(_rows(store))} entries in {store.directory}: {len(bad)} corrupt")
    return 1 if bad else 0


def gc(store: CacheStore, opts: dict[str, str]) -> int:
    removed = 0
    if "max_age_days" in opts:
        cutoff = time.time() - float(opts["max_age_days"]) * 86400
        for _, key, _, _, stored in _rows(store):
            if stored < cutoff and store.raw.delete(key):
                removed += 1
    if "max_size_gb" in opts:
        budget = float(opts["max_size_gb"]) * 1e9
        for _, key, _, _, _ in sorted(_rows(store), key=lambda r: r[4]):
            if store.raw.volume() <= budget:
                break
            if store.raw.delete(key):
                removed += 1
    print(f"gc: removed {removed} entries from {store.directory}")
    return 0


def clear(store: CacheStore, opts: dict[str, str]) -> int:
    print(f"clear: removed {store.raw.clear(retry=True)} entries from {store.directory}")
    return 0
