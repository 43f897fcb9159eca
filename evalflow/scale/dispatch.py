"""Running chunks of requests on a model, and what a finished chunk reports back.

A dispatcher takes an iterator of chunks, pulled lazily (the edge leases each chunk in the cache
only when a replica is ready for it), and yields each chunk's answers as it finishes, in whatever
order they finish. :class:`LocalDispatch` is ``workers=1``: chunks in this process, through
:func:`chunk_answers` (one at a time, unless the model pulls the next one early to keep its
batch full);
:class:`evalflow.scale.ray_workers.RayDispatch` keeps every Ray actor busy.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence

from evalflow.models.base import feature
from evalflow.records import Request

Chunk = Sequence[tuple[str, Request]]  # (request key, request), as the edge planned them

# chunks a served model answers at once (at least): one being answered, the next being prepared
# (a 512-request chunk of mmlu takes ~0.1-0.5 s to tokenize; two in-flight windows last ~0.1 s)
LOOKAHEAD = 2
# seconds the edge lets answers gather after the first one arrives before it saves them (one
# transaction): ~13 answers a transaction at 640/s rather than ~5, which halves the edge's share
# of the GIL the client's event loop needs; a kill loses at most this much of answered work
SETTLE = 0.02


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

    def served_counts(self) -> dict[str, int]:
        """Requests each server answered, summed over the replicas (empty: no served model)."""


@dataclass
class LocalDispatch:
    """The model in this process, loaded by ``model()`` on the first chunk (not before: a fully
    cached run never loads weights)."""

    model: Callable[[], Any]
    name: str = field(default_factory=lambda: f"local@{socket.gethostname()}:{os.getpid()}")

    def map(self, rtype: str, chunks: Iterable[Chunk]) -> Iterator[Done]:
        source = iter(chunks)
        for chunk in source:
            model = self.model()
            if feature(model, "ANSWERS_EACH"):  # e.g. a served model: chunks overlap, answers one by one
                yield from answered_each(model, rtype, itertools.chain([chunk], source), self.name)
                return
            yield from answered_chunks(model, rtype, itertools.chain([chunk], source), self.name)
            return

    def close(self) -> None:
        pass

    def served_counts(self) -> dict[str, int]:
        return {}  # the edge asks its own loaded model


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


def answered_chunks(model: Any, rtype: str, chunks: Iterable[Chunk], worker: str) -> Iterator[Done]:
    """Each chunk's answers from :func:`chunk_answers`, as the model hands them back (it may pull
    the next chunk before the current one is done).
    A chunk's ``seconds`` is the model's time since it last handed answers back (the edge's time
    saving them excluded), so with one chunk at a time it is that chunk's time, as before."""
    pulled: dict[int, Chunk] = {}

    def requests() -> Iterator[list[Request]]:
        for n, chunk in enumerate(chunks):
            pulled[n] = chunk
            yield [r for _, r in chunk]

    last = time.perf_counter()
    for n, answers in chunk_answers(model, rtype, requests()):
        chunk = pulled.pop(n)
        yield Done(tuple(k for k, _ in chunk), list(answers), worker, time.perf_counter() - last, type(model).__name__)
        last = time.perf_counter()


def chunk_answers(model: Any, rtype: str, chunks: Iterable[Sequence[Request]]) -> Iterator[tuple[int, list[Any]]]:
    """``(n, answers)`` for the ``n``-th chunk of requests (in the order pulled) once all of it is
    answered: the model's own ``answer_chunks(rtype, chunks)`` if it has one, else one chunk at a
    time. A model's own may pull the next chunk before the current one is done (to keep its batch
    full across chunk boundaries: the HF model's greedy decode loop) and hand chunks back in any
    order, but should pull no further than it has room to work on: pulling a chunk leases it, and
    a killed run loses the chunks pulled and not yet handed back.

    (An optional method looked up here rather than a feature of the model contract, whose file is
    part of every model's code identity: declaring it there would change every cache key.)"""
    own = getattr(type(model), "answer_chunks", None)
    if own is not None:
        return own(model, rtype, chunks)  # type: ignore[no-any-return]
    return ((n, list(getattr(model, rtype)(requests))) for n, requests in enumerate(chunks))


def answered_each(model: Any, rtype: str, chunks: Iterable[Chunk], worker: str) -> Iterator[Done]:
    """The answers of a model declaring ``answer_each(rtype, requests, on_answer(index, answer))``
    (a served model with requests in flight), as they arrive: each :class:`Done` holds every
    answer that arrived since the last one, so the edge persists them in one transaction (a
    failed request loses nothing answered, a kill the last ``SETTLE`` seconds' answers), and under load the batches grow instead of
    the edge falling behind with one transaction per answer.

    Chunks overlap: each is answered in a helper thread, and the next chunk is pulled (and so
    leased) as soon as fewer than twice ``model.in_flight()`` requests are unanswered or fewer than
    ``LOOKAHEAD`` chunks are running, so a server always has requests waiting for its free slots,
    from the run's first request to its last, whatever the chunk and task boundaries: the next
    chunk is tokenized while the one before it is being answered, not when its last requests are.
    Answers and ends come back through one queue, gathered for at most ``SETTLE`` seconds. After a
    chunk fails no new chunk is started; the others settle (their answers still yielded) and the
    first error is raised."""
    import threading

    inbox = _Inbox()
    backlog = 2 * max(1, int(feature(model, "in_flight")()))
    source = iter(chunks)
    state = _Running(model, rtype)
    started, last = 0, time.perf_counter()

    def run(n: int, chunk: Chunk) -> None:
        try:
            model.answer_each(rtype, [r for _, r in chunk], lambda i, a: inbox.put(("answer", n, i, a)))
            inbox.put(("end", n, None, None))
        except BaseException as exc:  # handed to the consuming thread
            inbox.put(("error", n, exc, None))

    while True:
        while state.error is None and (state.unanswered < backlog or len(state.running) < LOOKAHEAD):
            chunk = next(source, None)
            if chunk is None:
                break
            state.running[started] = (chunk, set())
            state.unanswered += len(chunk)
            threading.Thread(target=run, args=(started, chunk), name=f"{rtype}-answers-{started}", daemon=True).start()
            started += 1
        if not state.running:
            break
        keys, answers = state.settle(_drain(inbox, SETTLE))
        if keys:
            now = time.perf_counter()
            yield Done(tuple(keys), answers, worker, now - last, type(model).__name__)
            last = now
    if state.error is not None:
        raise state.error


@dataclass
class _Running:
    """:func:`answered_each`'s chunks in flight (each with the indices answered so far), the
    requests still owed, and the first error."""

    model: Any
    rtype: str
    running: dict[int, tuple[Chunk, set[int]]] = field(default_factory=dict)
    unanswered: int = 0
    error: BaseException | None = None

    def settle(self, events: Iterable[tuple[str, int, Any, Any]]) -> tuple[list[str], list[Any]]:
        """Take ``(kind, chunk, index or error, answer)`` events: the keys and answers that
        arrived; a chunk that ended (or failed) leaves ``running``, short answers become the error."""
        keys: list[str] = []
        answers: list[Any] = []
        for kind, n, what, answer in events:
            chunk, answered = self.running[n]
            if kind == "answer":
                answered.add(what)
                self.unanswered -= 1
                keys.append(chunk[what][0])
                answers.append(answer)
                continue
            del self.running[n]
            self.unanswered -= len(chunk) - len(answered)
            if kind == "error":
                self.error = self.error or what
            elif len(answered) != len(chunk) and self.error is None:
                self.error = _unanswered(self.model, self.rtype, len(chunk) - len(answered), len(chunk))
        return keys, answers


class _Inbox:
    """Answers handed from the client's thread to the edge: ``put`` appends to a deque and wakes
    the reader only if it is not already due to wake (``queue.Queue`` takes a lock and notifies on
    every put: a thread hop per answer, on the thread that keeps the server's slots full)."""

    def __init__(self) -> None:
        import collections
        import threading

        self.items: collections.deque[Any] = collections.deque()
        self.ready = threading.Event()

    def put(self, item: Any) -> None:
        self.items.append(item)
        if not self.ready.is_set():  # set: the reader has not cleared it yet, so it will see the item
            self.ready.set()


def _drain(inbox: _Inbox, settle: float = 0.0) -> list[Any]:
    """Every item put so far, waiting for the first one, and then for ``settle`` seconds more."""
    items: list[Any] = []
    deadline = None
    while True:
        if deadline is None:
            inbox.ready.wait()
        elif not inbox.ready.wait(max(0.0, deadline - time.perf_counter())):
            return items
        inbox.ready.clear()  # before reading: an item put from here on sets it again
        while inbox.items:
            items.append(inbox.items.popleft())
        if items and deadline is None:
            deadline = time.perf_counter() + settle
        if deadline is not None and time.perf_counter() >= deadline:
            return items


def _unanswered(model: Any, rtype: str, missing: int, total: int) -> Exception:
    from evalflow.errors import ModelError

    return ModelError(
        f"model {type(model).__name__}.answer_each left {missing} of {total} {rtype} requests unanswered; "
        "it must answer each one"
    )
