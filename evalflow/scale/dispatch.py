"""Running chunks of requests on a model, and what a finished chunk reports back.

A dispatcher takes an iterator of chunks, pulled lazily (the edge leases each chunk in the cache
only when a replica is ready for it), and yields each chunk's answers as it finishes, in whatever
order they finish. :class:`LocalDispatch` is ``workers=1``: one chunk at a time, in this process;
:class:`evalflow.scale.ray_workers.RayDispatch` keeps every Ray actor busy.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence

from evalflow.models.base import feature
from evalflow.records import Request

Chunk = Sequence[tuple[str, Request]]  # (request key, request), as the edge planned them


@dataclass(frozen=True)
class Done:
    """A chunk answered by one replica: ``answers[i]`` answers ``keys[i]``."""

    keys: tuple[str, ...]
    answers: list[Any]
    worker: str  # which replica: "local", or "w<index>@host:pid" for a Ray actor
    seconds: float  # time the replica spent answering (model loading excluded)
    model: str = ""  # the model's class name, for error messages


class Dispatch(Protocol):
    def map(self, rtype: str, chunks: Iterable[Chunk]) -> Iterator[Done]:
        """Answer every chunk ``chunks`` yields; an error in one chunk stops the iteration."""

    def close(self) -> None:
        """Release the replicas (end actors); a later ``map`` starts them again."""


@dataclass
class LocalDispatch:
    """The model in this process, loaded by ``model()`` on the first chunk (not before: a fully
    cached run never loads weights)."""

    model: Callable[[], Any]
    name: str = field(default_factory=lambda: f"local@{socket.gethostname()}:{os.getpid()}")

    def map(self, rtype: str, chunks: Iterable[Chunk]) -> Iterator[Done]:
        for chunk in chunks:
            model = self.model()
            if feature(model, "ANSWERS_EACH"):  # e.g. a served model
                yield from answered_each(model, rtype, chunk, self.name)
                continue
            t0 = time.perf_counter()
            answers = list(getattr(model, rtype)([r for _, r in chunk]))
            yield Done(tuple(k for k, _ in chunk), answers, self.name, time.perf_counter() - t0, type(model).__name__)

    def close(self) -> None:
        pass


@dataclass
class WorkerCounts:
    """What one replica did in a run: the manifest's ``inference.workers`` entries."""

    chunks: int = 0
    requests: int = 0
    seconds: float = 0.0

    def add(self, done: Done) -> None:
        self.chunks += 1
        self.requests += len(done.keys)
        self.seconds = round(self.seconds + done.seconds, 6)


def answered_each(model: Any, rtype: str, chunk: Chunk, worker: str) -> Iterator[Done]:
    """A one-request :class:`Done` per answer, as a model declaring ``answer_each(rtype, requests,
    on_answer(index, answer))`` hands them over (a served model with requests in flight): the edge
    then persists each the moment it arrives, so a kill or a failed request loses nothing answered.
    The model runs in a helper thread; its answers and its end come back through a queue."""
    import queue
    import threading

    inbox: queue.Queue[tuple[str, Any, Any]] = queue.Queue()

    def run() -> None:
        try:
            model.answer_each(rtype, [r for _, r in chunk], lambda i, a: inbox.put(("answer", i, a)))
            inbox.put(("end", None, None))
        except BaseException as exc:  # handed to the consuming thread
            inbox.put(("error", exc, None))

    thread = threading.Thread(target=run, name=f"{rtype}-answers", daemon=True)
    t0 = last = time.perf_counter()
    thread.start()
    answered: set[int] = set()
    while True:
        kind, what, answer = inbox.get()
        if kind == "error":
            raise what
        if kind == "end":
            break
        now = time.perf_counter()
        answered.add(what)
        yield Done((chunk[what][0],), [answer], worker, now - last, type(model).__name__)
        last = now
    thread.join()
    if len(answered) != len(chunk):
        from evalflow.errors import ModelError

        raise ModelError(
            f"model {type(model).__name__}.answer_each left {len(chunk) - len(answered)} of {len(chunk)} {rtype} "
            f"requests unanswered; it must answer each one (took {time.perf_counter() - t0:.1f} s)"
        )

