"""``python -m evalflow cache stats|verify|gc|clear|merge [cache_dir=DIR]``: look after a cache folder.

    stats    entries and bytes per stage (and per-request responses)
    verify   decode every entry and check its checksum; exit 1 when anything is corrupt
    gc       drop leases of dead processes and value files no entry points to (left by killed
             runs), entries older than max_age_days=N, then the oldest entries until the folder
             is under max_size_gb=X
    clear    delete every entry, and the side folders (models' file memos such as gguf-weights/)
    merge    SRC... cache_dir=DST: copy every intact entry of the SRC caches into DST
             (evalflow/cache/merge.py)

What each does is :mod:`evalflow.cache.upkeep`'s (and :mod:`evalflow.cache.merge`'s); this module
reads the words and prints what was done.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalflow.cache import upkeep
from evalflow.cache.store import CacheStore, default_cache_dir, unusable
from evalflow.commands.reference import print_help
from evalflow.commands.words import Command, Option, asks_for_help, parse_words
from evalflow.errors import CacheError, ConfigError


def _non_negative(value: str) -> float:
    """a number >= 0"""
    number = float(value)
    if not number >= 0:
        raise ValueError(value)
    return number


_DIR = Option("cache_dir", str, None, "the cache folder (default $EVALFLOW_CACHE, else ~/.cache/evalflow)")
_AGE = Option("max_age_days", _non_negative, None, "drop entries older than this many days")
_SIZE = Option("max_size_gb", _non_negative, None, "then drop the oldest entries until the folder is this small")
# Each action's words: the age and size bounds mean something to gc alone.
ACTIONS = {
    "stats": Command("cache stats", "entries and bytes per stage (and per-request responses)", options=(_DIR,)),
    "verify": Command(
        "cache verify", "decode every entry and check its checksum; exit 1 if any is corrupt", options=(_DIR,)
    ),
    "gc": Command(
        "cache gc",
        "drop leases of dead processes and value files no entry points to (left by killed runs), entries "
        "older than max_age_days, then the oldest entries until the folder is under max_size_gb",
        options=(_DIR, _AGE, _SIZE),
    ),
    "clear": Command(
        "cache clear",
        "delete every entry, and the side folders (models' file memos such as gguf-weights/)",
        options=(_DIR,),
    ),
    "merge": Command(
        "cache merge",
        "copy every intact entry of the SRC caches into cache_dir",
        "SRC...",
        options=(Option("cache_dir", str, None, "the destination (default $EVALFLOW_CACHE, else ~/.cache/evalflow)"),),
    ),
}
COMMAND = Command(
    "cache",
    "look after or merge cache folders",
    "stats|verify|gc|clear|merge",
    doc=__doc__ or "",
    actions=tuple(ACTIONS.values()),
)


def _options(argv: list[str]) -> tuple[str, Mapping[str, Any]]:
    if not argv or argv[0] not in ACTIONS or argv[0] == "merge":
        usage = "; ".join(action.line() for action in ACTIONS.values())
        raise ConfigError(f"unknown cache command {argv[:1]}; {usage}")
    command = argv[0]
    return command, parse_words(argv[1:], ACTIONS[command]).options


def main(argv: list[str]) -> int:
    if asks_for_help(argv):
        print_help(COMMAND)
        return 0
    if argv[:1] == ["merge"]:
        return merge_main(argv[1:])
    command, opts = _options(argv)
    directory = Path(opts["cache_dir"]).expanduser() if "cache_dir" in opts else default_cache_dir()
    if not (directory / "cache.db").is_file():  # never create a cache folder just to look at it
        if command == "clear":
            cleared = upkeep.clear_files(directory) if directory.is_dir() else []
            print(f"clear: no cache index in {directory}; removed {len(cleared)} leftover files and folders")
            return 0
        raise ConfigError(
            f"cache {command}: there is no cache at {directory} (no cache.db there). Check the "
            "cache_dir= value; runs write to $EVALFLOW_CACHE, else ~/.cache/evalflow."
        )
    try:
        store = CacheStore(directory)
    except CacheError as exc:
        return _damaged(command, directory, exc)
    try:
        return {"stats": _stats, "verify": _verify, "gc": _gc, "clear": _clear}[command](store, opts)
    except sqlite3.Error as exc:
        store.close()
        return _damaged(command, directory, unusable(directory, exc))
    finally:
        store.close()


def _stats(store: CacheStore, opts: Mapping[str, Any]) -> int:
    found = upkeep.stats(store)
    print(f"cache: {found.directory}  ({found.folder_bytes / 1e6:.1f} MB on disk, everything in the folder)")
    for tag, (count, size) in found.entries.items():
        print(f"  {tag:<22} {count:>9} entries {size / 1e6:>11.3f} MB")
    total_count, total_size = sum(c for c, _ in found.entries.values()), sum(b for _, b in found.entries.values())
    print(f"  {'total':<22} {total_count:>9} entries {total_size / 1e6:>11.3f} MB")
    for name, files, size in found.side_folders:
        print(f"  side folder {name + '/':<10} {files:>9} files   {size / 1e6:>11.3f} MB")
    if found.shared_weights is not None:
        shared, size = found.shared_weights
        print(
            f"converted model weights, shared by every cache folder (EVALFLOW_WEIGHTS_DIR): {shared} "
            f"({size / 1e6:.1f} MB)"
        )
    return 0


def _verify(store: CacheStore, opts: Mapping[str, Any]) -> int:
    """Exit 1 when anything is corrupt."""
    checked, bad = upkeep.verify(store)
    for key, why in bad:
        print(f"corrupt: {key}: {why}", file=sys.stderr)
    print(f"verified {checked} entries in {store.directory}: {len(bad)} corrupt")
    if bad:
        print("a run recomputes corrupt entries by itself; `cache clear` removes everything now", file=sys.stderr)
    return 1 if bad else 0


def _gc(store: CacheStore, opts: Mapping[str, Any]) -> int:
    done = upkeep.gc(store, opts.get("max_age_days"), opts.get("max_size_gb"))
    print(
        f"gc: removed {done.entries} entries, {done.orphans} orphan value files, {done.temporaries} half-written memo "
        f"temporaries and {done.memos} memos from {store.directory} ({done.bytes_left / 1e6:.1f} MB left)"
    )
    return 0


def _clear(store: CacheStore, opts: Mapping[str, Any]) -> int:
    removed, folders = upkeep.clear(store)
    names = f" and side folders {', '.join(folders)}" if folders else ""
    print(f"clear: removed {removed} entries{names} from {store.directory}")
    return 0


def _damaged(command: str, directory: Path, exc: CacheError) -> int:
    """A cache whose index (cache.db) cannot be read: ``clear`` is the way out, so it works on
    one; ``verify`` reports the damage as its finding (exit 1); the others refuse."""
    if command == "clear":
        removed = upkeep.clear_files(directory)
        print(f"clear: the cache index was damaged; removed {len(removed)} evalflow files and folders from {directory}")
        return 0
    if command == "verify":
        print(
            f"corrupt: {directory / 'cache.db'}: the cache index cannot be read ({exc.__cause__ or exc})",
            file=sys.stderr,
        )
        print(
            f"verified 0 entries in {directory}: the index is damaged; `python -m evalflow cache clear "
            f"cache_dir={directory}` removes it and every entry"
        )
        return 1
    raise exc


def merge_main(argv: list[str]) -> int:
    """``cache merge SRC... cache_dir=DST`` (DST defaults to the default cache folder)."""
    from evalflow.cache.merge import merge

    words = parse_words(argv, ACTIONS["merge"])
    sources = [Path(a).expanduser() for a in words.positional]
    dests = [words.options["cache_dir"]] if "cache_dir" in words.options else []
    if not sources:
        raise CacheError("cache merge: no source folders; usage: python -m evalflow cache merge SRC... cache_dir=DST")
    dest_dir = Path(dests[-1]).expanduser() if dests else default_cache_dir()
    if any(s.resolve() == dest_dir.resolve() for s in sources):
        raise CacheError(f"cache merge: {dest_dir} is both a source and the destination; merge into another cache_dir=")
    dest = CacheStore(dest_dir)
    try:
        counts = merge(sources, dest)
    finally:
        dest.close()
    print(
        f"merge: {counts.copied} entries copied, {counts.present} already present, "
        f"{counts.damaged} damaged and skipped, from {len(sources)} cache(s) into {dest_dir}"
    )
    return 0
