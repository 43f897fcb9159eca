"""Canonical bytes and their xxhash: the identity of every cache entry.

A fingerprint is canonical or refused: mapping keys are sorted, tuples and lists hash alike,
dataclasses hash by their type name and fields, floats by their exact repr. An unknown type raises
at plan time rather than hashing to a constant or an ``id()``, which would silently merge or split
cache entries.

>>> fingerprint({"b": 1, "a": (1.5, "x")}) == fingerprint({"a": [1.5, "x"], "b": 1})
True
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any

import xxhash


class UnhashableError(TypeError):
    """A value has no canonical form; add one rather than hashing it by identity."""


def canonical(value: Any) -> bytes:
    """Serialize ``value`` to bytes that are equal exactly when the values are equal."""
    out = bytearray()
    _write(value, out)
    return bytes(out)


def _write(v: Any, out: bytearray) -> None:
    t = type(v)  # the plain types first, by exact type (none has __fingerprint__): same bytes, fewer checks
    if t is str:
        data = v.encode("utf-8", "surrogatepass")
        out += b"s%d:" % len(data) + data
    elif t is tuple or t is list:
        out += b"l%d[" % len(v)
        for item in v:
            _write(item, out)
        out += b"]"
    elif t is int:
        out += b"i%d;" % v
    elif t in _DATACLASS_FIELDS:  # a dataclass seen before: its field names' bytes are kept (request keys)
        _write_dataclass(v, _DATACLASS_FIELDS[t], out)
    else:
        _write_other(v, out)


# per dataclass type: its header (``D<qualname>(``) and each field's name with that name's bytes
_DATACLASS_FIELDS: dict[type, tuple[bytes, tuple[tuple[str, bytes], ...]]] = {}


def _write_dataclass(v: Any, layout: tuple[bytes, tuple[tuple[str, bytes], ...]], out: bytearray) -> None:
    """A dataclass as ``_write_other`` writes it (same bytes), without looking its fields up again."""
    out += layout[0]
    for name, encoded in layout[1]:
        out += encoded
        _write(getattr(v, name), out)
    out += b")"


def _dataclass_layout(t: type) -> tuple[bytes, tuple[tuple[str, bytes], ...]]:
    """The bytes ``_write_other`` writes for ``t``'s header and field names, remembered for ``_write``
    when nothing about an instance can send it down another branch (no ``__getitem__``: the
    mapping branch comes first)."""
    layout = _DATACLASS_FIELDS.get(t)
    if layout is None:
        fields = []
        for f in dataclasses.fields(t):
            name = bytearray()
            _write(f.name, name)
            fields.append((f.name, bytes(name)))
        layout = (b"D" + t.__qualname__.encode() + b"(", tuple(fields))
        if not hasattr(t, "__getitem__"):
            _DATACLASS_FIELDS[t] = layout
    return layout


def _write_other(v: Any, out: bytearray) -> None:
    if hasattr(type(v), "__fingerprint__"):
        out += b"X"
        _write(v.__fingerprint__(), out)
    elif v is None:
        out += b"N"
    elif v is True or v is False:
        out += b"T" if v else b"F"
    elif isinstance(v, int):
        out += b"i%d;" % v
    elif isinstance(v, float):
        text = "nan" if math.isnan(v) else repr(v)
        out += b"f" + text.encode() + b";"
    elif isinstance(v, str):
        data = v.encode("utf-8", "surrogatepass")
        out += b"s%d:" % len(data) + data
    elif isinstance(v, bytes):
        out += b"b%d:" % len(v) + v
    elif isinstance(v, (list, tuple)):
        out += b"l%d[" % len(v)
        for item in v:
            _write(item, out)
        out += b"]"
    elif isinstance(v, dict) or (hasattr(v, "keys") and hasattr(v, "__getitem__")):
        keys = list(v.keys())
        if not all(isinstance(k, str) for k in keys):
            raise UnhashableError(f"mapping keys must be strings to fingerprint, got {keys[:3]!r}")
        out += b"d%d{" % len(keys)
        for k in sorted(keys):
            _write(k, out)
            _write(v[k], out)
        out += b"}"
    elif dataclasses.is_dataclass(v) and not isinstance(v, type):
        _write_dataclass(v, _dataclass_layout(type(v)), out)
    else:
        raise UnhashableError(
            f"cannot fingerprint a value of type {type(v).__name__}: give it a __fingerprint__() "
            "method returning plain data, or convert it before it reaches a stage"
        )


def fingerprint(value: Any) -> str:
    """The 128-bit xxhash of the canonical bytes of ``value``, as 32 hex characters."""
    return xxhash.xxh3_128_hexdigest(canonical(value))


_FILE_MEMO: dict[tuple[str, int, int, int], str] = {}


def file_fingerprint(path: str | os.PathLike[str]) -> str:
    """The xxhash of a file's bytes (a folder: of its files' relative names and bytes).

    Memoized per process by (path, size, mtime, inode) so a run that names a file many times reads
    it once. Identity comes from contents, never from the path: a moved file keeps its cache.
    """
    p = Path(path)
    if p.is_dir():
        parts = [
            (str(f.relative_to(p)), file_fingerprint(f))
            for f in sorted(p.rglob("*"))
            if f.is_file() and "__pycache__" not in f.parts
        ]
        return fingerprint(parts)
    st = p.stat()
    memo_key = (str(p.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    if memo_key not in _FILE_MEMO:
        h = xxhash.xxh3_128()
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
        _FILE_MEMO[memo_key] = h.hexdigest()
    return _FILE_MEMO[memo_key]
