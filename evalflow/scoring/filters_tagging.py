"""lm-eval's filters for tagging tasks: part-of-speech tags (``regex_pos``) and named-entity spans
(``format_span``), as lm-eval 0.4.13 ships them (``filters/extraction.py: POSFilter``,
``filters/transformation.py: SPANFilter``), byte for byte in behaviour::

    >>> regex_pos([["[('The', 'DET'), ('cat', 'NOUN')]", "no tags"]], [{}])
    [[['DET', 'NOUN'], ['invalid']]]
    >>> format_span([["Person: Ada Lovelace $$ Location: London, Paris"]], [{}])
    [['per: ada lovelace $ loc: london $ loc: paris']]
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from evalflow.scoring.registry import register_filter

_TAGGED_TOKEN = re.compile(r"\('([^']*)', '([^']*)'\)")
# format_span's label spellings and the tag each becomes; only the word before a ":" is rewritten.
_SPAN_LABELS = {
    "person": "PER",
    "location": "LOC",
    "organization": "ORG",
    "counties": "LOC",
    "places": "LOC",
    "people": "PER",
    "persons": "PER",
    "company": "ORG",
    "country": "LOC",
    "continent": "LOC",
    "time": "DATE",
    "date": "DATE",
    "per": "PER",
    "loc": "LOC",
    "org": "ORG",
}
_SPAN_ENTITY = re.compile(r"\b(PER|LOC|ORG|DATE):\s*([^$]+)")


@register_filter("regex_pos")
def regex_pos(
    resps: list[Any],
    docs: Sequence[Mapping[str, Any]],
    *,
    regex_pattern: str = r"\['(.*?)'\]",
    group_select: int = 0,
    fallback: list[str] | None = None,
) -> list[Any]:
    """The POS tags of ``('token', 'TAG')`` pairs in each response (a response that is already a
    list of pairs is read directly), else ``fallback`` (``["invalid"]``). As in lm-eval,
    ``regex_pattern`` and ``group_select`` are accepted but the pair pattern is fixed."""
    fallback = ["invalid"] if fallback is None else fallback

    def tags(resp: Any) -> Any:
        pairs = _TAGGED_TOKEN.findall(resp) if isinstance(resp, str) else resp
        return [pos for _, pos in pairs] or fallback

    return [[tags(r) for r in inst] for inst in resps]


@register_filter("format_span")
def format_span(resps: list[Any], docs: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Each response as ``label: entity $ label: entity`` (lower case, labels normalized to
    per/loc/org/date, comma-separated entities split, ``none`` dropped)."""
    return [[_entities(_normalize_labels(r.lower())) for r in inst] for inst in resps]


def _normalize_labels(text: str) -> str:
    text = text.lower()
    for key, value in _SPAN_LABELS.items():
        text = re.sub(rf"\b{re.escape(key)}\s*:", f"{value}:", text)
    text = "$".join(text.split("$$"))
    return text.rstrip("$")


def _entities(text: str) -> str:
    found = []
    for label, values in _SPAN_ENTITY.findall(text.replace("\n", "$").strip()):
        for entity in (v.strip() for v in values.split(",")):
            if entity.lower() != "none":
                found.append(f"{label.lower()}: {entity}")
    return " $ ".join(found)
