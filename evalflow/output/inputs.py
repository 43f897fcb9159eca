"""A stage's key inputs as plain JSON data for manifest.json, so `explain` can diff two runs from
their folders alone (no cache needed).

The inputs are exactly what the stage's cache key hashes (:meth:`evalflow.dag.node.Node.key_inputs`).
Long strings (a chat template, a long prompt template) are kept as their hash plus a short head, which
is enough to tell that and where they changed and keeps the manifest small::

    >>> plain({"limit": 10, "chat": {"template": "x" * 300}})["chat"]["template"]["chars"]
    300
"""

from __future__ import annotations

import dataclasses
from typing import Any

from evalflow.cache.fingerprint import fingerprint

LONG = 200  # strings longer than this are summarized
HEAD = 60


def plain(value: Any) -> Any:
    """``value`` as JSON data: tuples become lists, objects their fingerprint form, long strings a
    summary ``{"xxh": ..., "chars": ..., "head": ...}``."""
    if hasattr(type(value), "__fingerprint__"):
        return {"function": str(value), "xxh": fingerprint(value)}
    if isinstance(value, str):
        if len(value) <= LONG:
            return value
        return {"xxh": fingerprint(value), "chars": len(value), "head": value[:HEAD]}
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict) or (hasattr(value, "keys") and hasattr(value, "__getitem__")):
        return {str(k): plain(value[k]) for k in value.keys()}  # noqa: SIM118 -- duck-typed: iter() may not give keys
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return repr(value)
