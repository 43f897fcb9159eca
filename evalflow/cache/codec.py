"""Cache values as data: JSON with a schema version and a checksum, never pickle.

A shared cache folder must not be a way to run code on whoever reads it, so values are JSON text.
Records (the frozen dataclasses of :mod:`evalflow.records`) are tagged with their type name and
rebuilt on the way out, with their tuple fields turned back into tuples. Each value carries a
checksum of its payload, so a torn or tampered entry is detected instead of being scored.

Wire format: ``b"EVF1 <xxh64 hex of payload>\\n" + payload`` where payload is UTF-8 JSON. A
record is ``{..fields.., "__record__": "TypeName"}``; a plain mapping that itself has a
``"__record__"`` key (a document field may be named anything) is wrapped as
``{"__record__": "__mapping__", "items": {...}}`` so it cannot be mistaken for a record.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

import xxhash

from evalflow.records import RECORD_TYPES

SCHEMA = b"EVF1"
_RECORDS = {cls.__name__: cls for cls in RECORD_TYPES}
_TAG, _MAPPING = "__record__", "__mapping__"
_TUPLE_FIELDS: dict[type, frozenset[str]] = {}


class CorruptEntry(ValueError):
    """A stored value failed its checksum or could not be decoded."""


def encode(value: Any) -> bytes:
    # surrogatepass: a lone surrogate (json.loads makes one from "\ud800" in a data file) round-trips
    text = json.dumps(_to_json(value), ensure_ascii=False, separators=(",", ":"))
    payload = text.encode("utf-8", "surrogatepass")
    return SCHEMA + b" " + xxhash.xxh64_hexdigest(payload).encode() + b"\n" + payload


def decode(blob: bytes) -> Any:
    header, sep, payload = blob.partition(b"\n")
    parts = header.split(b" ")
    if not sep or len(parts) != 2 or parts[0] != SCHEMA:
        raise CorruptEntry("unknown header (written by another evalflow version, or damaged)")
    if xxhash.xxh64_hexdigest(payload).encode() != parts[1]:
        raise CorruptEntry("checksum mismatch (truncated or modified)")
    try:
        return _from_json(json.loads(payload.decode("utf-8", "surrogatepass")))
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptEntry(f"undecodable payload: {exc}") from exc


def _to_json(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        name = type(v).__name__
        if _RECORDS.get(name) is not type(v):
            raise TypeError(f"{name} is not a record type the cache can store")
        out = {f.name: _to_json(getattr(v, f.name)) for f in dataclasses.fields(v)}
        out[_TAG] = name
        return out
    if isinstance(v, (list, tuple)):
        return [_to_json(x) for x in v]
    if isinstance(v, dict) or (hasattr(v, "keys") and hasattr(v, "items")):
        items = {str(k): _to_json(x) for k, x in v.items()}
        return {_TAG: _MAPPING, "items": items} if _TAG in items else items
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    raise TypeError(f"cannot store a value of type {type(v).__name__} in the cache")


def _from_json(v: Any) -> Any:
    if isinstance(v, list):
        return [_from_json(x) for x in v]
    if isinstance(v, dict):
        name = v.get(_TAG)
        if name is None:
            return {k: _from_json(x) for k, x in v.items()}
        if name == _MAPPING:
            return {k: _from_json(x) for k, x in v["items"].items()}
        cls = _RECORDS[name]
        tuples = _tuple_fields(cls)
        kwargs = {}
        for k, x in v.items():
            if k == _TAG:
                continue
            x = _from_json(x)
            kwargs[k] = tuple(x) if k in tuples and isinstance(x, list) else x
        return cls(**kwargs)
    return v


def _tuple_fields(cls: type) -> frozenset[str]:
    """Fields annotated as tuples (possibly optional or in a union), restored from JSON arrays."""
    if cls not in _TUPLE_FIELDS:
        hints = typing.get_type_hints(cls)
        names = set()
        for name, hint in hints.items():
            args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, _UnionType) else (hint,)
            if any(typing.get_origin(a) is tuple or a is tuple for a in args):
                names.add(name)
        _TUPLE_FIELDS[cls] = frozenset(names)
    return _TUPLE_FIELDS[cls]


_UnionType = type(int | str)
