"""A model for the scale-out tests: the dummy model, slowed down per request so that a test can
act (kill an actor, kill the driver) in the middle of a run. ``delay`` is a speed setting: it is
not part of the model's identity, so slow and fast runs share cache entries."""

from __future__ import annotations

import time
from typing import Any, Sequence

from evalflow.models.dummy import DummyModel
from evalflow.records import Request


class SlowModel(DummyModel):
    def __init__(self, delay: float = 0.0, **config: Any) -> None:
        super().__init__(**config)
        self.delay = float(delay)

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        return {"type": "scale-test", "salt": config.get("salt", "")}

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        time.sleep(self.delay * len(requests))
        return super().loglikelihood(requests)

    def generate_until(self, requests: Sequence[Request]) -> list[str]:
        time.sleep(self.delay * len(requests))
        return super().generate_until(requests)
