"""A real evalflow run held in the middle of its inference, for the tests of what a *running* run
looks like (its status, its live progress, the viewer following it).

:func:`live_run` starts ``evaluate()`` of the toy task on :class:`GatedModel` (the dummy model,
registered through the public registry as ``GATED``) in a background thread. The model answers its
first call (one chunk: ``chunk_size`` requests) and blocks in its second until the test releases
it. By the time the second call starts, the edge has persisted and reported the first chunk, and
the run's events file has its progress line (the events writer writes a list's first answered
requests at once), so :meth:`LiveRun.wait_progress` is a wait on an event, not a poll:

    with live_run(tmp_path) as run:
        run.wait_progress()             # blocked in call 2; events.jsonl shows chunk_size done
        ...                             # look at run.folder while it runs
        run.release()                   # or run.release(fail=True): the model raises instead
        run.wait_done()                 # results (or the run's error, raised)
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import evalflow
from evalflow.core.records import Generation, Request
from evalflow.errors import ModelError
from evalflow.models.dummy import DummyModel
from tests.support.toy_tasks import write_toy_library

GATED = "evalflow_tests_gated"  # model.type
HOLD_LIMIT = 120.0  # seconds a held call waits for its release before it fails the run
GATE_FAILURE = "the gated test model was told to fail"


@dataclass
class Gate:
    """One run's gate: ``held`` is set when the model blocks (or when the run ended first),
    ``released`` lets it go on, answering or raising (``fail``)."""

    held: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    fail: bool = False
    calls: int = 0

    def call(self) -> None:
        self.calls += 1
        if self.calls < 2:
            return
        self.held.set()
        if not self.released.wait(HOLD_LIMIT):
            raise ModelError(f"the gated test model was held {HOLD_LIMIT:.0f} s and never released")
        if self.fail:
            raise ModelError(GATE_FAILURE)


_gates: dict[str, Gate] = {}
_numbers = itertools.count(1)


@evalflow.register_model(GATED)
class GatedModel(DummyModel):
    """The dummy model's answers, each call first through its run's :class:`Gate` (named by the
    model config's ``gate``; a test setting, not part of the identity)."""

    def __init__(self, gate: str = "", **config: Any) -> None:
        super().__init__(**config)
        self.gate = _gates[gate]

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        return {"type": GATED, "salt": config.get("salt", "")}

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        self.gate.call()
        return super().loglikelihood(requests)

    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]:
        self.gate.call()
        return super().loglikelihood_rolling(requests)

    def generate_until(self, requests: Sequence[Request]) -> list[Generation]:
        self.gate.call()
        return super().generate_until(requests)


@dataclass
class LiveRun:
    """A run going on in a background thread (see the module's docstring)."""

    folder: Path
    gate: Gate
    thread: threading.Thread
    outcome: dict[str, Any] = field(default_factory=dict)  # "results" or "error", once it ended

    def wait_progress(self, timeout: float = 120.0) -> None:
        """Until the model holds its second call: the first chunk is answered and in the events file."""
        assert self.gate.held.wait(timeout), f"the run never reached its second model call ({self.folder})"
        if "error" in self.outcome:
            raise AssertionError(f"the run ended before its model held: {self.outcome['error']!r}")
        assert self.thread.is_alive(), f"the run ended before its model held ({self.folder})"

    def release(self, fail: bool = False) -> None:
        """Let the held call go on: answer (the run completes) or raise (the run fails)."""
        self.gate.fail = fail
        self.gate.released.set()

    def wait_done(self, timeout: float = 120.0) -> dict[str, Any]:
        """The run's results once it ended; its error raised if it failed."""
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the run did not end within {timeout:.0f} s ({self.folder})"
        if "error" in self.outcome:
            raise self.outcome["error"]
        return self.outcome["results"]


@contextlib.contextmanager
def live_run(
    tmp_path: Path, task: str = "toy_mc", limit: int = 10, chunk_size: int = 4, **settings: Any
) -> Iterator[LiveRun]:
    """A :class:`LiveRun` of ``task`` (the toy library's, written under ``tmp_path``) into
    ``tmp_path/run``; on leaving the block the run is released (to fail, if nothing released it)
    and joined, so no thread outlives the test."""
    name = f"gate-{next(_numbers)}"
    gate = _gates[name] = Gate()
    (tmp_path / "live").mkdir()
    library = write_toy_library(tmp_path / "live")
    folder = tmp_path / "run"
    outcome: dict[str, Any] = {}

    def body() -> None:
        try:
            outcome["results"] = evalflow.evaluate(
                task,
                {"type": GATED, "gate": name},
                output_dir=folder,
                include_path=[str(library)],
                cache_dir=str(tmp_path / "live-cache"),
                limit=limit,
                chunk_size=chunk_size,
                bootstrap_iters=0,
                **settings,
            )
        except BaseException as exc:  # the test reads it from wait_done
            outcome["error"] = exc
        finally:
            gate.held.set()  # a run that ended before its model held wakes wait_progress

    thread = threading.Thread(target=body, name=f"evalflow-live-{name}", daemon=True)
    run = LiveRun(folder, gate, thread, outcome)
    thread.start()
    try:
        yield run
    finally:
        if not gate.released.is_set():
            run.release(fail=True)
        thread.join(HOLD_LIMIT)
        _gates.pop(name, None)
