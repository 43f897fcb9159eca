"""Variants of :class:`tests.support.thinking.ScriptedThinker` for tokens, cost and compare:

- :class:`RoomyThinker`: the same model with a larger budget: the generations the scripted one cuts
  off at ``max_gen_toks`` finish here (closed thinking, the right sum, ``eos``);
- :class:`SplitThinker`: the scripted generations with half of each one's tokens reported as
  reasoning (as a served ``reasoning_content`` would be counted).

Each has its own identity, so their answers never mix in a cache with the scripted model's.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from evalflow.core.records import Finish, Generation, Request
from tests.support.thinking import SHAPES, ScriptedThinker, raw_generation

ROOMY_TOKENS = 48  # what a cut-off generation takes when it may finish


def roomy_generation(prompt: str) -> tuple[str, Finish]:
    """The scripted generation for a toy_gen prompt, finished where the scripted one hit the cap."""
    text, finish = raw_generation(prompt)
    if finish.stop_reason != "length":
        return text, finish
    a, b = map(int, re.findall(r"What is (\d+) plus (\d+)\?\nAnswer:$", prompt)[0])
    finished = SHAPES[0][0].format(a=a, b=b, s=a + b)
    return finished, dataclasses.replace(finish, stop_reason="eos", completion_tokens=ROOMY_TOKENS)


def split_generation(prompt: str) -> tuple[str, Finish]:
    """The scripted generation, half its completion tokens (rounded down) reported as reasoning."""
    text, finish = raw_generation(prompt)
    return text, dataclasses.replace(finish, reasoning_tokens=(finish.completion_tokens or 0) // 2)


class RoomyThinker(ScriptedThinker):
    @classmethod
    def identity(cls, **_: Any) -> dict[str, Any]:
        return {"type": "roomy-thinker"}

    def generate_until(self, requests: Sequence[Request]) -> list[Generation]:
        ScriptedThinker.calls += len(requests)
        return [Generation(*roomy_generation(r.args[0])) for r in requests]


class SplitThinker(ScriptedThinker):
    @classmethod
    def identity(cls, **_: Any) -> dict[str, Any]:
        return {"type": "split-thinker"}

    def generate_until(self, requests: Sequence[Request]) -> list[Generation]:
        ScriptedThinker.calls += len(requests)
        return [Generation(*split_generation(r.args[0])) for r in requests]
