"""Scripted models for the judge tests: a scored model whose answers the test sets, and a judge
whose verdicts follow from the prompt, both counting the requests they answer.

    model.type=tests.support.judge_models:ScriptedAnswerer   # answers ANSWERS[question]
    judge: {model: {type: "tests.support.judge_models:ScriptedJudge"}}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from evalflow.core.records import Request
from evalflow.models.dummy import DummyModel
from evalflow.models.hf import HFModel


class ScriptedAnswerer(DummyModel):
    """Generates ``ANSWERS[question]`` for the prompt's last ``Question: ...`` line. Its identity is
    the table, so a test that edits answers re-runs inference (and only the edited ones differ)."""

    ANSWERS: ClassVar[dict[str, str]] = {}
    # sampled requests: repeat r of a question answers SAMPLED[question][r]
    SAMPLED: ClassVar[dict[str, list[str]]] = {}
    calls = 0

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        return {
            "type": "scripted-answerer",
            "answers": sorted(cls.ANSWERS.items()),
            "sampled": sorted(cls.SAMPLED.items()),
        }

    def generate_until(self, requests: Sequence[Request]) -> list[str]:
        ScriptedAnswerer.calls += len(requests)
        out = []
        for r in requests:
            question = r.args[0].rsplit("Question: ", 1)[-1].split("\n", 1)[0].strip()
            sampled = self.SAMPLED.get(question) if r.seed is not None else None
            out.append(sampled[r.repeat] if sampled else self.ANSWERS[question])
        return out


class ScriptedJudge(DummyModel):
    """Grades the answer between ``Answer: `` and the next newline of its prompt: ``Score: 5`` when
    it equals the ``Gold: `` line, ``Score: 1`` otherwise, and ``no idea`` (unparseable) when the
    answer contains ``???``. ``prompts`` records every prompt it was sent, in order."""

    prompts: ClassVar[list[str]] = []
    fail_after: int | None = None  # raise once this many prompts were answered (a judge killed mid-run)

    def __init__(self, style: str = "plain", **config: Any) -> None:
        super().__init__(**config)
        self.style = style

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        return {"type": "scripted-judge", "style": config.get("style", "plain")}

    def generate_until(self, requests: Sequence[Request]) -> list[str]:
        out = []
        for r in requests:
            if self.fail_after is not None and len(ScriptedJudge.prompts) >= self.fail_after:
                raise KeyboardInterrupt("the judge was killed")
            prompt = r.args[0]
            ScriptedJudge.prompts.append(prompt)
            answer = prompt.split("Answer: ", 1)[-1].split("\n", 1)[0].strip()
            gold = prompt.split("Gold: ", 1)[-1].split("\n", 1)[0].strip()
            if "???" in answer:
                out.append("no idea")
            else:
                out.append(f"Score: {5 if answer == gold else 1}" + (" (strict)" if self.style == "strict" else ""))
        return out

    @classmethod
    def reset(cls) -> None:
        cls.prompts = []
        cls.fail_after = None


class SharedHF(HFModel):
    """evalflow's HF backend, built once per test process for each config: a run builds its judge
    model anew, and loading SmolLM2 (the GGUF memo, the key/value self-check) costs far more CPU
    than judging 5 answers, so a test of several runs pays for one load. Answers, and the cache
    identity (the HF backend's, plus this file's code), are the plain HFModel's."""

    _built: ClassVar[dict[str, SharedHF]] = {}

    def __new__(cls, *args: Any, **config: Any) -> SharedHF:
        key = repr((args, sorted(config.items())))
        if key not in cls._built:
            cls._built[key] = super().__new__(cls)
        return cls._built[key]

    def __init__(self, *args: Any, **config: Any) -> None:
        if not getattr(self, "_loaded", False):
            super().__init__(*args, **config)
            self._loaded = True
