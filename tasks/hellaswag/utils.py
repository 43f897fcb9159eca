"""HellaSwag's document preprocessing, as lm-eval 0.4.13 does it (``tasks/hellaswag/utils.py``).

The query is ``"<activity_label>: <ctx_a> <ctx_b capitalized>"``; query and endings lose the
bracketed WikiHow markup (``[title]`` becomes a sentence break, other ``[...]`` vanish) and
doubled spaces. Works on a ``datasets.Dataset`` (what evalflow passes) or a list of rows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any


def preprocess(text: str) -> str:
    """Strip WikiHow artifacts: " [title]" ends a sentence, other brackets are dropped."""
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def process_doc(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The row plus ``query``, cleaned ``choices`` and the integer ``gold`` label."""
    context = doc["ctx_a"] + " " + doc["ctx_b"].capitalize()
    return {
        **doc,
        "query": preprocess(doc["activity_label"] + ": " + context),
        "choices": [preprocess(ending) for ending in doc["endings"]],
        "gold": int(doc["label"]),
    }


def process_docs(dataset: Any) -> Any:
    """Apply :func:`process_doc` to every row (``Dataset.map`` keeps the original columns too)."""
    if hasattr(dataset, "map"):
        return dataset.map(process_doc)
    rows: Iterable[Mapping[str, Any]] = dataset
    return [process_doc(row) for row in rows]
