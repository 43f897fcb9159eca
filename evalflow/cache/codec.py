"""Cache values as data: JSON with a schema version and a checksum, never pickle.

A shared cache folder must not be a way to run code on whoever reads it, so values are JSON text.
Records (the frozen dataclasses of :mod:`evalflow.core.records`) are tagged with their type name and
rebuilt on the way out, with their tuple fields turned back into tuples. Each value carries a
checksum of its payload, so a torn or tampered entry is detected instead of being scored.

Wire format: ``<schema> <xxh64 hex of payload>\n`` + payload, where payload is UTF-8 JSON. A
record is ``{..fields.., "__record__": "TypeName"}``; a plain mapping that itself has a
``"__record__"`` key (a document field may be named anything) is wrapped as
``{"__record__": "__mapping__", "items": {...}}`` so it cannot be mistaken for a record.

Schema ``EVF2`` (a value holding strings of ``SHARED_MIN`` characters or more) stores each such
string once: the payload is ``[strings, tree]`` and the tree holds ``{"__record__": "__ref__",
"i": n}`` for ``strings[n]``. A 5-shot prompt is the context of each of its 4 choices' requests
and of its few-shot stage entry; stored once, an mmlu instances entry is a quarter of the bytes to
encode, write, read and parse, and the decoded records share one string object. ``EVF1`` (no such
string) is the plain tree, and is still read.

Schema ``EVFT`` is one ``str`` stored as its UTF-8 bytes, not as JSON (:func:`encode_text`): a
samples file's text (megabytes) is then written and copied out without escaping or parsing it, and
:func:`text_payload` hands its bytes back for a file as they are.

JSON is written and parsed by orjson when it can be exact, else by the standard library: orjson
would write NaN and infinities as ``null`` and refuses lone surrogates and integers beyond 64
bits, so values holding those take ``json`` (which keeps them), and parsing falls back the same way.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from typing import Any

import orjson
import xxhash

from evalflow.core.records import RECORD_TYPES

SCHEMA = b"EVF1"
SHARED = b"EVF2"  # with a table of long strings (see the module docstring)
TEXT = b"EVFT"  # one str as its UTF-8 bytes (see the module docstring)
SHARED_MIN = 128  # characters: shorter strings are cheaper inline than as a reference
_RECORDS = {cls.__name__: cls for cls in RECORD_TYPES}
_TAG, _MAPPING, _REF = "__record__", "__mapping__", "__ref__"
_TUPLE_FIELDS: dict[type, frozenset[str]] = {}
_FIELDS: dict[type, tuple[str, ...]] = {cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in RECORD_TYPES}


class CorruptEntry(ValueError):
    """A stored value failed its checksum or could not be decoded."""


def encode(value: Any) -> bytes:
    tree = _Tree()
    data = tree.walk(value)
    schema = SCHEMA
    if tree.strings:
        schema, data = SHARED, [list(tree.strings), data]
    payload = None if tree.inexact else _orjson_dumps(data)
    if payload is None:
        # surrogatepass: a lone surrogate (json.loads makes one from "\ud800" in a data file) round-trips
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        payload = text.encode("utf-8", "surrogatepass")
    return schema + b" " + xxhash.xxh64_hexdigest(payload).encode() + b"\n" + payload


def encode_text(payload: bytes) -> bytes:
    """A string's UTF-8 bytes as an ``EVFT`` entry (read back by :func:`decode` as the ``str``)."""
    return TEXT + b" " + xxhash.xxh64_hexdigest(payload).encode() + b"\n" + payload


def verified_text(blob: bytes) -> memoryview | None:
    """The UTF-8 bytes of an ``EVFT`` entry's string once its checksum is right, as a view into
    ``blob`` (a samples text is megabytes: not copied); None for an entry of another schema."""
    start = text_start(blob)
    return None if start is None else memoryview(blob)[start:]


def text_start(blob: Any) -> int | None:
    """Where an ``EVFT`` entry's text starts in ``blob`` (bytes, or an mmap of its value file),
    once its checksum over the rest is right; None for an entry of another schema."""
    end: int = blob.find(b"\n", 0, 64)
    if end < 0 or blob[: len(TEXT) + 1] != TEXT + b" ":
        return None
    with memoryview(blob) as whole, whole[end + 1 :] as payload:
        if xxhash.xxh64_hexdigest(payload).encode() != blob[len(TEXT) + 1 : end]:
            raise CorruptEntry("checksum mismatch (truncated or modified)")
    return end + 1


def decode(blob: bytes) -> Any:
    return decode_verified(verified(blob))


def verified(blob: bytes) -> bytes:
    """``blob`` itself once its header and checksum are right (cheap: no parsing), so a reader can
    tell a damaged entry from a good one now and pay for decoding only if it uses the value."""
    header, sep, payload = blob.partition(b"\n")
    parts = header.split(b" ")
    if not sep or len(parts) != 2 or parts[0] not in (SCHEMA, SHARED, TEXT):
        raise CorruptEntry("unknown header (written by another evalflow version, or damaged)")
    if xxhash.xxh64_hexdigest(payload).encode() != parts[1]:
        raise CorruptEntry("checksum mismatch (truncated or modified)")
    return blob


def decode_verified(blob: bytes) -> Any:
    """The value of a blob :func:`verified` accepted."""
    header, _, payload = blob.partition(b"\n")
    if header.startswith(TEXT):
        try:
            return payload.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise CorruptEntry(f"undecodable text: {exc}") from exc
    try:
        data = _parse(payload)
        if header.startswith(SHARED):
            strings, data = data
            return _Rebuild(strings).walk(data)
        return _Rebuild([]).walk(data)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise CorruptEntry(f"undecodable payload: {exc}") from exc


def _orjson_dumps(data: Any) -> bytes | None:
    try:
        return orjson.dumps(data)
    except TypeError:  # a lone surrogate, an integer beyond 64 bits: json writes them exactly
        return None


def _parse(payload: bytes) -> Any:
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:  # NaN, Infinity, a lone surrogate, a huge integer
        return json.loads(payload.decode("utf-8", "surrogatepass"))


class _Tree:
    """One value as JSON data: records tagged, long strings numbered in ``strings``; ``inexact``
    when it holds a float orjson cannot write (NaN, an infinity)."""

    def __init__(self) -> None:
        self.strings: dict[str, int] = {}
        self.inexact = False

    def walk(self, v: Any) -> Any:
        t = type(v)
        if t is str:
            return self._string(v) if len(v) >= SHARED_MIN else v
        if t is int or t is bool or v is None:
            return v
        if t is float:
            if v != v or v in (math.inf, -math.inf):
                self.inexact = True
            return v
        if t is tuple or t is list:
            return [self.walk(x) for x in v]
        if t is dict:
            return self._mapping(v)
        names = _FIELDS.get(t)
        if names is not None:
            out = {name: self.walk(getattr(v, name)) for name in names}
            out[_TAG] = t.__name__
            return out
        return self._other(v)

    def _string(self, v: str) -> Any:
        index = self.strings.setdefault(v, len(self.strings))
        return {_TAG: _REF, "i": index}

    def _mapping(self, v: Any) -> Any:
        items = {str(k): self.walk(x) for k, x in v.items()}
        return {_TAG: _MAPPING, "items": items} if _TAG in items else items

    def _other(self, v: Any) -> Any:
        """Subclasses of the plain types (numpy floats, str enums), other mappings; else refused."""
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            raise TypeError(f"{type(v).__name__} is not a record type the cache can store")
        if isinstance(v, (list, tuple)):
            return [self.walk(x) for x in v]
        if isinstance(v, dict) or (hasattr(v, "keys") and hasattr(v, "items")):
            return self._mapping(v)
        for base in (bool, int, float, str):
            if isinstance(v, base):
                return self.walk(base(v))
        raise TypeError(f"cannot store a value of type {type(v).__name__} in the cache")


class _Rebuild:
    """JSON data back into records, references into their (shared) strings."""

    def __init__(self, strings: list[str]) -> None:
        self.strings = strings

    def walk(self, v: Any) -> Any:
        t = type(v)
        if t is list:
            return [self.walk(x) for x in v]
        if t is not dict:
            return v
        name = v.get(_TAG)
        if name is None:
            return {k: self.walk(x) for k, x in v.items()}
        if name == _REF:
            return self.strings[v["i"]]
        if name == _MAPPING:
            return {k: self.walk(x) for k, x in v["items"].items()}
        cls = _RECORDS[name]
        tuples = _tuple_fields(cls)
        kwargs = {}
        for k, x in v.items():
            if k == _TAG:
                continue
            x = self.walk(x)
            kwargs[k] = tuple(x) if k in tuples and type(x) is list else x
        return cls(**kwargs)


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
