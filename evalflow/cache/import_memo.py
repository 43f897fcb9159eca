"""What a source file imports, remembered across runs by the file's content hash.

A stage's code identity (:func:`evalflow.cache.code.module_closure`) reads the ``import``
statements of every evalflow module the stage runs; parsing some 60 files with ``ast`` is a
noticeable part of a fully cached run. The names a file imports are a pure function of its bytes
(and of the module name it is read as, for relative imports), so they are kept in one JSON file in
the user's evalflow cache folder, keyed by the xxh3-128 of the very bytes that were parsed (the
hash ``file_fingerprint`` gives), the module name and whether it is a package: an edited file has
another hash and is parsed again, so a remembered entry can never be stale. The file is only a
memo: unreadable, damaged or unwritable, it is ignored and the files are parsed.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import xxhash

VERSION = 1  # of the memo's layout and of what an entry means; part of the file name
LIMIT = 4096  # entries; beyond it, only those this process used are kept (old edits drop out)

_memo: dict[str, list[str]] | None = None
_used: set[str] = set()
_dirty = False


def memo_path() -> Path:
    from evalflow.cache.store import user_cache_dir

    return user_cache_dir() / f"code-imports-v{VERSION}.json"


def remembered_imports(
    path: str, digest: str, module: str, is_package: bool, parse: Callable[[bytes], tuple[str, ...]]
) -> tuple[str, ...]:
    """``parse(bytes of path)``, or what it gave for a file with these bytes (``digest``) before."""
    memo = _load()
    key = f"{digest} {module} {int(is_package)}"
    _used.add(key)
    names = memo.get(key)
    if isinstance(names, list) and all(isinstance(n, str) for n in names):
        return tuple(names)
    data = Path(path).read_bytes()
    parsed = parse(data)
    if xxhash.xxh3_128_hexdigest(data) == digest:  # the file did not change since it was hashed
        global _dirty
        memo[key], _dirty = list(parsed), True
    return parsed


def save() -> None:
    """Write the memo if this process added to it (atomically: readers see the old or new file)."""
    global _dirty
    if not _dirty or _memo is None:
        return
    _dirty = False
    keep = _memo if len(_memo) <= LIMIT else {k: v for k, v in _memo.items() if k in _used}
    try:
        target = memo_path()
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(keep, fh, separators=(",", ":"))
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:  # a read-only home: the memo is an optimisation only
        pass


def _load() -> dict[str, list[str]]:
    global _memo
    if _memo is None:
        try:
            loaded = json.loads(memo_path().read_text(encoding="utf-8"))
            _memo = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            _memo = {}
    return _memo
