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
