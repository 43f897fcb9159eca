"""Image files a task's data names by path, hashed into the data's identity.

An image task's rows may hold a file path instead of the image (``doc_to_image: image_path``).
The file is read when requests are built, so the bytes that decide the requests live outside the
data files whose bytes key the load_docs stage. For a task that sets ``doc_to_image``, the data's
identity (:func:`evalflow.taskspec.data.docsets.data_identity`) therefore also covers the bytes of every
file its rows name, path by path (the manifest records them, so ``explain`` names the edited file):
edit one image and the stages from load_docs on are planned anew, and the requests of exactly the
documents showing it get new keys (their digests hash the new pixels); every other request is
served from the cache.

Which strings are files is decided on the rows as read (every split, string columns and lists of
strings, before ``process_docs``), resolved as ``doc_to_image`` resolves them: against the working
directory. File bytes are hashed once per (path, size, mtime, inode) in a process
(:func:`~evalflow.cache.fingerprint.file_fingerprint`). A path that task code builds itself (a
``!function`` joining a folder and an id) is not seen: name the file in the data instead.
"""

from __future__ import annotations

import os
from typing import Any

from evalflow.cache.fingerprint import file_fingerprint

_MAX_PATH = 4096  # what doc_to_image takes for a path (longer strings are base64 data)
# (data fingerprint, working directory) -> the files its rows name (relative paths resolve against the latter)
_NAMED: dict[tuple[str, str], tuple[str, ...]] = {}


def named_files(dataset: Any, data_identity: str) -> tuple[str, ...]:
    """The existing files ``dataset``'s rows name in string values, sorted (memoized by the
    data's own fingerprint, which changes with any row). ``dataset`` maps each split to a
    ``datasets`` table, or to plain rows (read without ``datasets``, whose columns then each hold
    one kind of value: taskspec/data/jsonl.py), whose every value is looked at."""
    memo = (data_identity, os.getcwd())
    if memo not in _NAMED:
        found: set[str] = set()
        for split in dataset:
            table = dataset[split]
            if isinstance(table, list):
                for row in table:
                    _collect(list(row.values()), found)
                continue
            for column, feature in table.features.items():
                if _holds_strings(feature):
                    for value in table[column]:
                        _collect(value, found)
        _NAMED[memo] = tuple(sorted(found))
    return _NAMED[memo]


def files_identity(files: tuple[str, ...]) -> dict[str, str]:
    """``{path: xxhash of its bytes}``; a file deleted since is keyed as missing (the instances
    stage then names it in its error)."""
    return {f: file_fingerprint(f) if os.path.isfile(f) else "<missing>" for f in files}


def _holds_strings(feature: Any) -> bool:
    dtype = getattr(feature, "dtype", None)
    if dtype in ("string", "large_string"):
        return True
    inner = getattr(feature, "feature", None)  # datasets.Sequence / List
    if inner is None and isinstance(feature, list) and feature:
        inner = feature[0]
    return inner is not None and _holds_strings(inner)


def _collect(value: Any, found: set[str]) -> None:
    if isinstance(value, str):
        if 0 < len(value) < _MAX_PATH and "\n" not in value and os.path.isfile(value):
            found.add(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect(v, found)
