"""A "checkpoint" of given skill on the built-in arith_mc task, for release-gate tests.

It reads the last ``What is A op B?`` of each context and prefers the right choice (or writes
the right answer) on a fraction ``skill`` of the questions (chosen by a hash of the question, so two skills
share their known questions: a lower skill only loses questions, as a regressed checkpoint does).
Used as ``model.type=tests.support.checkpoints:ArithCheckpoint model.skill=0.5``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import xxhash

from evalflow.core.records import Request

_QUESTION = re.compile(r"What is (\d+) ([+-]) (\d+)\?")


class ArithCheckpoint:
    built = 0  # how many were built in this process (the gate builds one for all its rounds)

    def __init__(self, skill: float = 1.0, **_: Any) -> None:
        self.skill = float(skill)
        ArithCheckpoint.built += 1

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        return {"type": "arith_checkpoint", "skill": float(config.get("skill", 1.0))}

    def _knows(self, question: str) -> bool:
        return xxhash.xxh64_intdigest(question.encode()) / 2**64 < self.skill

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        out = []
        for request in requests:
            context, continuation = request.args
            a, op, b = _QUESTION.findall(context)[-1]
            right = str(int(a) + int(b) if op == "+" else int(a) - int(b))
            correct = continuation.strip() == right
            wins = correct == self._knows(f"{a}{op}{b}")
            noise = xxhash.xxh64_intdigest(continuation.encode()) / 2**64
            out.append((-1.0 - noise if wins else -5.0 - noise, False))
        return out

    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]:
        """One nat per word: a checkpoint's skill is in its arithmetic, not its fluency."""
        return [-float(len(request.args[0].split())) for request in requests]

    def generate_until(self, requests: Sequence[Request]) -> list[str]:
        """The last question's answer, right on the known questions and off by one on the others."""
        out = []
        for request in requests:
            a, op, b = _QUESTION.findall(request.args[0])[-1]
            right = int(a) + int(b) if op == "+" else int(a) - int(b)
            out.append(f" {right if self._knows(f'{a}{op}{b}') else right + 1}")
        return out
