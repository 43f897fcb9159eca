"""Samples rows and lm-eval's document hash text, byte for byte what ``json`` writes, faster.

A 5-shot row repeats its context in every choice's arguments (four times on mmlu, several kB
each), and ``json.dumps`` escapes each copy again; lm-eval's ``doc_hash`` wants the document as
``json.dumps(doc, indent=2)``, which runs the pure-Python encoder. Here a row is joined from its
values' JSON as the encoder itself joins a mapping (``{`` key ``: `` value ``, `` ... ``}``), with
each long argument string escaped once, and a document of plain JSON types (strings, ints, bools,
None, lists, string-keyed dicts: no floats, whose text may differ) is written by orjson, whose
two-space indentation is the same text. Anything else takes ``json`` itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson

_ENCODE = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps(value, ensure_ascii=False)
LONG = 256  # argument strings at least this long are escaped once per row
_INT64 = (-(2**63), 2**64)


def row_json(row: Mapping[str, Any]) -> str:
    """``json.dumps(row, ensure_ascii=False)``."""
    if type(row) is not dict or not all(type(k) is str for k in row):
        return json.dumps(row, ensure_ascii=False)
    escaped: dict[str, str] = {}
    parts = []
    for key, value in row.items():
        text = _arguments_json(value, escaped) if key == "arguments" else _ENCODE(value)
        parts.append(_ENCODE(key) + ": " + text)
    return "{" + ", ".join(parts) + "}"


def _arguments_json(value: Any, escaped: dict[str, str]) -> str:
    """``{"gen_args_0": {"arg_0": context, ...}, ...}`` with each long string escaped once."""
    if type(value) is not dict or not all(
        type(k) is str and type(v) is dict and all(type(a) is str for a in v) for k, v in value.items()
    ):
        return _ENCODE(value)
    inner = []
    for key, args in value.items():
        items = []
        for name, arg in args.items():
            if type(arg) is str and len(arg) >= LONG:
                text = escaped.get(arg)
                if text is None:
                    text = escaped[arg] = _ENCODE(arg)
            else:
                text = _ENCODE(arg)
            items.append(_ENCODE(name) + ": " + text)
        inner.append(_ENCODE(key) + ": {" + ", ".join(items) + "}")
    return "{" + ", ".join(inner) + "}"


def indented_doc_json(doc: Any) -> str:
    """``json.dumps(doc, indent=2, default=str, ensure_ascii=False)`` (lm-eval's doc_hash text)."""
    if _plain(doc):
        try:
            return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode("utf-8")
        except TypeError:  # a lone surrogate: json writes it
            pass
    return json.dumps(doc, indent=2, default=str, ensure_ascii=False)


def _plain(value: Any) -> bool:
    """Whether ``value`` holds only types orjson writes exactly as ``json`` does."""
    t = type(value)
    if t is str or t is bool or value is None:
        return True
    if t is int:
        return _INT64[0] <= value < _INT64[1]
    if t is list:
        return all(_plain(x) for x in value)
    if t is dict:
        return all(type(k) is str and _plain(x) for k, x in value.items())
    return False
