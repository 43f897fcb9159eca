"""WinoGrande's multiple-input formatting (lm-eval 0.4.13 ``tasks/winogrande/preprocess_winogrande.py``).

A sentence has one blank ``_``. Each option gives a context: the sentence up to the blank with
the option in it. The continuation scored after every context is the text after the blank.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ANSWER_TO_INDEX = {"1": 0, "2": 1}


def doc_to_text(doc: Mapping[str, Any]) -> int:
    """The index of the correct option (an int: this is what marks the task as multiple-input)."""
    return ANSWER_TO_INDEX[doc["answer"]]


def doc_to_target(doc: Mapping[str, Any]) -> str:
    """The sentence after the blank, without surrounding whitespace."""
    blank = doc["sentence"].index("_") + 1
    return str(doc["sentence"][blank:].strip())


def doc_to_choice(doc: Mapping[str, Any]) -> list[str]:
    """One context per option: the sentence up to the blank, then the option."""
    blank = doc["sentence"].index("_")
    head = doc["sentence"][:blank]
    return [head + doc["option1"], head + doc["option2"]]
