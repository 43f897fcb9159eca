"""Models for the reliability tests, usable as ``model.type=tests.support.faulty:X``."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalflow.core.records import Generation, Request
from tests.support.models import CountingModel


class GateModel(CountingModel):
    """A CountingModel whose first call waits until ``EVALFLOW_TEST_GATE_N`` processes have made
    theirs (each announces itself with a file in ``EVALFLOW_TEST_GATE``): parallel runs are then
    provably computing at the same time, whatever the machine's load. Answers equal the
    CountingModel's (same identity), so results compare with a serial CountingModel run."""

    _passed = False

    def _gate(self) -> None:
        if GateModel._passed or not os.environ.get("EVALFLOW_TEST_GATE"):
            return
        gate = Path(os.environ["EVALFLOW_TEST_GATE"])
        gate.mkdir(parents=True, exist_ok=True)
        (gate / str(os.getpid())).touch()
        need = int(os.environ.get("EVALFLOW_TEST_GATE_N", "1"))
        deadline = time.monotonic() + 120
        while (arrived := len(list(gate.iterdir()))) < need:
            if time.monotonic() > deadline:  # the runs did not overlap: fail rather than go on alone
                raise RuntimeError(f"GateModel: {arrived} of {need} processes reached the gate {gate} within 120 s")
            time.sleep(0.01)
        GateModel._passed = True

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        self._gate()
        return super().loglikelihood(requests)

    def generate_until(self, requests: Sequence[Request]) -> Sequence[str | Generation]:
        self._gate()
        return super().generate_until(requests)


class WrongGenerateCountModel(CountingModel):
    """Answers generate_until requests with one response too many (loglikelihood correctly)."""

    def generate_until(self, requests: Sequence[Request]) -> list[Any]:
        return [*super().generate_until(requests), "extra"]
