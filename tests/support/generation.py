"""Generation requests as the tests of the HF backend's decode loop build them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalflow.core.records import Request, generation_text

FEW_SHOT = "Question: What is two plus two?\nAnswer: four\n\nQuestion: What is 1 + 1?\nAnswer: 2\n\n"
"""Two worked examples in front of several questions: a prefix the rows of a decode step share."""


def gen(context: str, **kwargs) -> Request:
    """A ``generate_until`` request for ``context`` with these generation kwargs."""
    return Request("generate_until", (context, kwargs))


def texts(answers: Sequence[Any]) -> list[Any]:
    """The texts of a backend's ``generate_until`` answers (:class:`Generation` or plain ``str``)."""
    return [generation_text(a) for a in answers]
