"""Models for tests that need to count or slow down calls, usable as ``model.type=tests.support.models:X``."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from evalflow.core.records import Generation, Request
from evalflow.models.dummy import DummyModel


class CountingModel(DummyModel):
    """The dummy model, counting every request it answers in a class-wide counter (and a file if
    ``EVALFLOW_TEST_CALL_LOG`` is set, for runs in a subprocess)."""

    calls_total = 0
    requests_seen: ClassVar[list[Request]] = []

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        return {"type": "counting", "salt": config.get("salt", "")}

    def _count(self, requests: Sequence[Request]) -> None:
        CountingModel.calls_total += len(requests)
        CountingModel.requests_seen.extend(requests)
        log = os.environ.get("EVALFLOW_TEST_CALL_LOG")
        if log:
            with open(log, "a") as fh:
                fh.write(f"{len(requests)}\n")
        delay = float(os.environ.get("EVALFLOW_TEST_DELAY", "0"))
        if delay:
            time.sleep(delay * len(requests))

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        self._count(requests)
        return super().loglikelihood(requests)

    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]:
        self._count(requests)
        return super().loglikelihood_rolling(requests)

    def generate_until(self, requests: Sequence[Request]) -> Sequence[str | Generation]:
        self._count(requests)
        return super().generate_until(requests)

    @classmethod
    def reset(cls) -> None:
        cls.calls_total = 0
        cls.requests_seen = []


class BatchingModel(CountingModel):
    """The counting model answering each chunk in batches of ``BATCH`` requests through the
    optional ``answer_parts`` hook (as the HF model does per forward pass), each batch one line of
    the call log (``EVALFLOW_TEST_CALL_LOG``): a kill test can aim at the N-th answered batch."""

    BATCH = 4

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        return {"type": "batching", "salt": config.get("salt", "")}

    def answer_parts(self, rtype: str, chunks: Any) -> Any:
        for n, requests in enumerate(chunks):
            for start in range(0, len(requests), self.BATCH):
                answers = getattr(CountingModel, rtype)(self, requests[start : start + self.BATCH])
                yield n, dict(enumerate(answers, start))

    def _whole(self, rtype: str, requests: Sequence[Request]) -> list[Any]:
        parts = [part for _, part in self.answer_parts(rtype, [requests])]
        return [a for part in parts for a in part.values()]

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        return self._whole("loglikelihood", requests)

    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]:
        return self._whole("loglikelihood_rolling", requests)

    def generate_until(self, requests: Sequence[Request]) -> list[str]:
        return self._whole("generate_until", requests)


class DriftingModel(CountingModel):
    """The counting model whose answers shift with the class-wide ``DRIFT`` while its identity
    stays: a served model updated behind the same name, which only ``recompute`` can notice."""

    DRIFT = 0

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        return {"type": "drifting"}

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        return [(logprob - DriftingModel.DRIFT, greedy) for logprob, greedy in super().loglikelihood(requests)]


class WrongCountModel(DummyModel):
    """Returns one response too few: the run must fail with a clear ModelError."""

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        return super().loglikelihood(requests)[:-1]


class UserModel:
    """A user's own model object: only the three request types (no identity()), answering as the
    dummy model with ``salt`` and counting loglikelihood requests in ``calls``."""

    def __init__(self, salt: str = "mine") -> None:
        self.inner, self.calls = DummyModel(salt=salt), 0

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        self.calls += len(requests)
        return self.inner.loglikelihood(requests)

    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]:
        return self.inner.loglikelihood_rolling(requests)

    def generate_until(self, requests: Sequence[Request]) -> Sequence[str | Generation]:
        return self.inner.generate_until(requests)


class StrictModel:
    """A user's class by import path (``model.type=tests.support.models:StrictModel``) whose
    constructor takes one key and no ``**kwargs``: any key it did not ask for is a TypeError."""

    def __init__(self, speed: int = 1) -> None:
        self.inner, self.speed = DummyModel(salt=f"strict-{speed}"), speed

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        return self.inner.loglikelihood(requests)

    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]:
        return self.inner.loglikelihood_rolling(requests)

    def generate_until(self, requests: Sequence[Request]) -> Sequence[str | Generation]:
        return self.inner.generate_until(requests)


class NoisyOracleModel(CountingModel):
    """Answers sampled generations right about half the time, from a table of right answers.

    ``ANSWERS`` maps a question's text to its right answer; a prompt's last ``Question: ...``
    line picks the entry. Each sample (seed, repeat) is right, off by one or off by two, drawn
    from a hash, so k samples of one document disagree and a majority can be wrong: what the
    reductions (pass@k, maj@k, mean) must tell apart. Counts calls like :class:`CountingModel`.
    """

    ANSWERS: ClassVar[dict[str, int]] = {}

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        return {"type": "noisy-oracle", "answers": sorted(cls.ANSWERS.items())}

    def generate_until(self, requests: Sequence[Request]) -> list[str]:
        self._count(requests)
        out = []
        for r in requests:
            question = r.args[0].rsplit("Question: ", 1)[-1].split("\nAnswer:", 1)[0].strip()
            right = self.ANSWERS[question]
            digest = hashlib.sha256(f"{question}|{r.seed}|{r.repeat}".encode()).digest()
            u = int.from_bytes(digest[:8], "big") / 2**64
            answer = right if u < 0.5 else right + 1 if u < 0.8 else right + 2
            out.append(f"Let me think. {right} or {answer}?\n#### {answer}")
        return out


class VisionCountingModel(CountingModel):
    """A counting model that takes images: it answers with each image's size and mean pixel, so a
    test sees that the pixels (not a path or a reference) reached the model."""

    MULTIMODAL = ("generate_until",)
    images_seen: ClassVar[list[Any]] = []

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        return {"type": "vision-counting", "salt": config.get("salt", "")}

    def generate_until(self, requests: Sequence[Request]) -> list[str]:
        self._count(requests)
        out = []
        for r in requests:
            visual = r.args[2]["visual"]
            VisionCountingModel.images_seen.extend(visual)
            out.append(
                " ".join(
                    f"{im.width}x{im.height}:{sum(im.convert('L').tobytes()) // (im.width * im.height)}"
                    for im in visual
                )
            )
        return out

    @classmethod
    def reset(cls) -> None:
        super().reset()
        cls.images_seen = []


class IdentitylessModel:
    """The three request types, answered as the dummy model answers, and no ``identity()``: a model
    object evalflow can never cache. Cooperative (``super().__init__()``), so a test may mix it into
    lm-eval's ``LM`` (``class MyLM(IdentitylessModel, LM)``)."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = DummyModel()

    def loglikelihood(self, requests: Any) -> Any:
        return self.inner.loglikelihood(requests)

    def loglikelihood_rolling(self, requests: Any) -> Any:
        return self.inner.loglikelihood_rolling(requests)

    def generate_until(self, requests: Any) -> Any:
        return self.inner.generate_until(requests)
