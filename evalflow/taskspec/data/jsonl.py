"""Local JSON Lines documents read directly, when ``datasets`` would certainly give the same rows.

``datasets.load_dataset("json", data_files={split: file.jsonl})`` turns each file into an Arrow
table and back, and importing it and preparing 57 mmlu subjects costs about a third of a
cold mmlu run with an instant model. The round trip changes values only where Arrow's type
inference does: rows with different keys (missing ones become null), a column mixing ints and
floats (all become floats), strings that look like ISO dates (timestamps), nested objects
(structs filled out with nulls), empty lists, and the schema of the first split cast onto the
others. So the rows are parsed here only when none of that can happen: every row of every split
has the same keys in the same order, and each column holds one kind of value throughout (strings
that do not start like a date, booleans, 64-bit integers, floats, or non-empty lists of such
strings). Anything else returns None, and the caller loads with ``datasets`` as lm-eval does.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Mapping
from typing import Any

import orjson

DATE = re.compile(r"\s*\d{4}-\d\d-\d\d")  # how an ISO-8601 timestamp starts, which Arrow would infer
_INT64 = (-(2**63), 2**63)


def read_jsonl_splits(
    path: str, name: str | None, kwargs: Mapping[str, Any], files: Mapping[str, tuple[str, ...]]
) -> dict[str, list[dict[str, Any]]] | None:
    """``{split: rows}`` of a ``json`` builder over local ``.jsonl`` files named per split, as
    ``datasets`` would return them; None when that cannot be certain (see the module docstring)."""
    data_files = kwargs.get("data_files")
    if path != "json" or name is not None or set(kwargs) != {"data_files"} or not isinstance(data_files, Mapping):
        return None
    if not files or set(files) != {str(k) for k in data_files} or glob.has_magic(repr(data_files)):
        return None  # a pattern: datasets' own file order decides, not ours
    splits: dict[str, list[dict[str, Any]]] = {}
    layout = None
    for split, paths in files.items():
        rows: list[dict[str, Any]] = []
        for file in paths:
            read = _rows(file) if file.endswith(".jsonl") else None
            if read is None:
                return None
            rows += read
        found = _layout(rows)
        if found is None or (layout is not None and found != layout):
            return None
        layout, splits[split] = found, rows
    return splits


def _rows(file: str) -> list[dict[str, Any]] | None:
    """The objects of a JSON Lines file; None for anything but one object per (non-blank) line."""
    with open(file, "rb") as fh:
        data = fh.read()
    if b"\r" in data:
        return None
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    rows = []
    for line in lines:
        if not line.strip():
            return None
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:  # NaN, a lone surrogate, a huge integer, bad JSON: datasets decides
            return None
        if type(row) is not dict:
            return None
        rows.append(row)
    return rows


def _layout(rows: list[dict[str, Any]]) -> tuple[tuple[str, str], ...] | None:
    """Each column's name and kind, when all rows share the columns, in order, and each column one
    kind that Arrow keeps as it is; else None."""
    if not rows:
        return None
    names = tuple(rows[0])
    for row in rows:
        if tuple(row) != names:
            return None
    layout = []
    for name in names:
        kinds = {_kind(row[name]) for row in rows}
        kind = kinds.pop() if len(kinds) == 1 else None
        if kind is None:
            return None
        layout.append((name, kind))
    return tuple(layout)


def _kind(value: Any) -> str | None:
    t = type(value)
    if t is str:
        return None if DATE.match(value) else "str"
    if t is bool or t is float:
        return t.__name__
    if t is int:
        return "int" if _INT64[0] <= value < _INT64[1] else None
    if t is list and value and all(type(x) is str and not DATE.match(x) for x in value):
        return "list[str]"
    return None
