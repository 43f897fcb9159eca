"""Models for the scale-out tests: the dummy model, optionally slowed down per request, and
optionally *holding* one call so that a test can act (kill an actor, kill the driver) while that
call is certainly in flight. ``delay`` and the hold are test settings: they are not part of the
model's identity, so slow, held and fast runs share cache entries.

The hold works across processes (Ray actors, the driver): every call takes the next number in the
folder ``hold`` (a file created exclusively per call), and the call numbered ``hold_at`` writes
``hold/held`` (JSON: the Ray actor's name, its pid, the number of requests it holds) and then
blocks until its process is killed. The test waits for ``held`` instead of polling the cache
and hoping the run is still going.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evalflow.core.records import Generation, Request
from evalflow.models.dummy import DummyModel
from tests.support.models import BatchingModel

HOLD_LIMIT = 120.0  # seconds a held call waits to be killed before it fails the run
SLOW = "tests.support.scale_models:SlowModel"  # as model.type


class SlowModel(DummyModel):
    """With ``served_as``, the model counts what it answers as a served model counts its servers'
    HTTP requests (``served_counts``: ``{served_as: requests answered}``), for the manifest's
    per-server counts of a run whose replicas die."""

    def __init__(
        self, delay: float = 0.0, hold: str = "", hold_at: int = 0, served_as: str = "", **config: Any
    ) -> None:
        super().__init__(**config)
        self.delay = float(delay)
        self.hold, self.hold_at = hold, int(hold_at)
        self.served_as, self.answered = served_as, 0

    def served_counts(self) -> dict[str, int]:
        return {self.served_as: self.answered} if self.served_as else {}

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        return {"type": "scale-test", "salt": config.get("salt", "")}

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        self._call(requests)
        return super().loglikelihood(requests)

    def generate_until(self, requests: Sequence[Request]) -> Sequence[str | Generation]:
        self._call(requests)
        return super().generate_until(requests)

    def _call(self, requests: Sequence[Request]) -> None:
        if self.hold and take_number(Path(self.hold)) == self.hold_at:
            hold_until_killed(Path(self.hold), len(requests))
        time.sleep(self.delay * len(requests))
        self.answered += len(requests)


def take_number(folder: Path) -> int:
    """The next call number in ``folder``, unique across processes (O_EXCL file creation)."""
    folder.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        try:
            os.close(os.open(folder / f"call-{n}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return n
        except FileExistsError:
            n += 1


def hold_until_killed(folder: Path, requests: int) -> None:
    """Announce the held call in ``folder/held`` (written whole: a reader never sees half of it),
    then block; a call still held after HOLD_LIMIT seconds fails (the test never killed it)."""
    actor = ""
    try:
        import ray

        if ray.is_initialized():
            actor = ray.get_runtime_context().get_actor_name() or ""
    except ImportError:
        pass
    note = folder / f"held.{os.getpid()}"
    note.write_text(json.dumps({"actor": actor, "pid": os.getpid(), "requests": requests}))
    note.rename(folder / "held")
    threading.Event().wait(HOLD_LIMIT)
    raise RuntimeError(f"SlowModel held a call for {HOLD_LIMIT:.0f} s and nobody killed its process")


def wait_held(folder: Path, running: Callable[[], bool], timeout: float = 120.0) -> dict[str, Any]:
    """The test's side: what ``folder/held`` says, once a call holds. Fails the test when the run
    ends first (``running()`` turns false) or nothing holds within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (folder / "held").exists():
        assert running(), f"the run ended before a model call held ({folder})"
        assert time.monotonic() < deadline, f"no model call held within {timeout:.0f} s ({folder})"
        time.sleep(0.02)
    return json.loads((folder / "held").read_text())


class HeldBatchingModel(BatchingModel):
    """The batching test model (``answer_parts``, batches of ``BATCH``) for Ray replicas, whose
    environment a test cannot set: ``delay`` seconds per request, each answered batch's size
    appended to the file ``log`` (one line, across processes), and, with ``hold``, one held batch:
    the first batch of the run, on any replica, that is the ``hold_batch``-th of its chunk holds
    (as :class:`SlowModel`'s held call) until its process is killed."""

    def __init__(self, delay: float = 0.0, log: str = "", hold: str = "", hold_batch: int = 0, **config: Any) -> None:
        super().__init__(**config)
        self.delay, self.log = float(delay), log
        self.hold, self.hold_batch = hold, int(hold_batch)

    def answer_parts(self, rtype: str, chunks: Any) -> Any:
        for n, requests in enumerate(chunks):
            for b, start in enumerate(range(0, len(requests), self.BATCH), 1):
                batch = requests[start : start + self.BATCH]
                if self.hold and b == self.hold_batch and take_number(Path(self.hold)) == 1:
                    hold_until_killed(Path(self.hold), len(batch))
                time.sleep(self.delay * len(batch))
                answers = getattr(DummyModel, rtype)(self, batch)
                if self.log:
                    with open(self.log, "a") as fh:
                        fh.write(f"{len(batch)}\n")
                yield n, dict(enumerate(answers, start))


def answered_batches(log: Path) -> list[int]:
    """The sizes of the batches :class:`HeldBatchingModel` answered, in every process."""
    return [int(n) for n in log.read_text().split()] if log.exists() else []
