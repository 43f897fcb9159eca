"""A scripted reasoning model for the toy library's ``toy_gen`` (questions "What is A plus B?"): each
document gets one of six generation shapes, each with the stop reason and token counts a backend
would report, so the truncation figures of a run are known exactly. Usable as
``model.type=tests.support.thinking:ScriptedThinker``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

from evalflow.core.records import Finish, Generation, Request

# (raw generation, backend stop reason, completion tokens); {s} is the right sum, {w} a wrong one
SHAPES: tuple[tuple[str, str, int], ...] = (
    ("<think>{a} plus {b}</think>\n#### {s}", "eos", 12),  # closed thinking, right answer
    ("<think>{a} plus {b} is maybe #### {w} and", "length", 32),  # cut off inside the thinking
    ("<think>first\n\nthen</think>\n#### {s}", "eos", 14),  # a stop sequence inside the thinking
    ("<think>all thought</think>", "eos", 6),  # an empty answer after the marker
    ("#### {w} because", "length", 32),  # cut off with no thinking marker at all
    ("<think>ok</think>\n#### {s}", "stop", 9),  # ended at a stop sequence after the answer
)
TRUNCATED_SHAPES = (1, 4)  # the shapes a run with think_end_token="</think>" reports as cut off


def shape_of(a: int, b: int) -> int:
    """Which shape the document "What is A plus B?" gets."""
    return (a + 3 * b) % len(SHAPES)


def raw_generation(prompt: str) -> tuple[str, Finish]:
    """The scripted generation for a toy_gen prompt and its finish."""
    a, b = map(int, re.findall(r"What is (\d+) plus (\d+)\?\nAnswer:$", prompt)[0])
    template, reason, tokens = SHAPES[shape_of(a, b)]
    text = template.format(a=a, b=b, s=a + b, w=a + b + 1)
    return text, Finish(stop_reason=reason, prompt_tokens=len(prompt.split()), completion_tokens=tokens)


class ScriptedThinker:
    """Answers toy_gen with :data:`SHAPES`; counts its calls class-wide (a cached run makes none)."""

    calls: ClassVar[int] = 0

    def __init__(self, **_: Any) -> None:
        pass

    @classmethod
    def identity(cls, **_: Any) -> dict[str, Any]:
        return {"type": "scripted-thinker"}

    def generate_until(self, requests: Sequence[Request]) -> list[Generation]:
        ScriptedThinker.calls += len(requests)
        return [Generation(*raw_generation(r.args[0])) for r in requests]

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        raise AssertionError("toy_gen asks for generations only")

    loglikelihood_rolling = loglikelihood
