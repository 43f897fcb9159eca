"""Running chunks of requests on a model, and what a finished chunk reports back.

A dispatcher takes an iterator of chunks, pulled lazily (the edge leases each chunk in the cache
only when a replica is ready for it), and yields each chunk's answers as it finishes, in whatever
order they finish, or part by part (:func:`answered_parts`, :func:`answered_each`: the edge
saves answers as they come, so a kill loses the batches in flight, not their chunks).
:class:`LocalDispatch` is ``workers=1``: chunks in this process (one at a time, unless the model
pulls the next one early to keep its batch full);
:class:`evalflow.scale.ray_workers.RayDispatch` keeps every Ray actor busy.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evalflow.core.records import Request
from evalflow.models.protocol import feature

Chunk = Sequence[tuple[str, Request]]  # (request key, request), as the edge planned them

# chunks a served model answers at once (at least): one being answered, the next being prepared
# (a 512-request chunk of mmlu takes ~0.1-0.5 s to tokenize; two in-flight windows last ~0.1 s)
LOOKAHEAD = 2
# seconds the edge lets answers gather after the first one arrives before it saves them (one
# transaction): ~13 answers a transaction at 640/s rather than ~5, which halves the edge's share
# of the GIL the client's event loop needs; a kill loses at most this much of answered work
SETTLE = 0.02
# seconds of a local model's answered batches (``answered_parts``) the edge lets gather before it
# saves them, when no chunk completed meanwhile: a kill loses at most this much answered work (plus
# the batch running), where a chunk (~25 s of SmolLM2 on a CPU) would lose it all; a transaction
# costs well under a millisecond, so this is a small fraction of the model's time
SAVE_EVERY = 0.1


@dataclass(frozen=True)
class Done:
    """Answers from one replica, persisted together: a whole chunk, or the part of one or more
    chunks answered since the last (``answered_parts``, ``answered_each``). ``answers[i]``
    answers ``keys[i]``."""

    keys: tuple[str, ...]
    answers: list[Any]
    worker: str  # which replica: "local", or "w<index>@host:pid" for a Ray actor
    seconds: float  # time the replica spent answering (model loading excluded)
    model: str = ""  # the model's class name, for error messages
    chunks: int = 1  # chunks this completes: 0 for a part of one (``answered_parts``, ``answered_each``)
    # a served model's replica in a Ray actor: HTTP requests each server answered since the actor's
    # last report, counted by the driver as it receives them (an actor that dies takes nothing with it)
    served: Mapping[str, int] = field(default_factory=dict)


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
            yield from answered(self.model(), rtype, itertools.chain([chunk], source), self.name)
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
        self.chunks += done.chunks
        self.requests += len(done.keys)
        self.seconds = round(self.seconds + done.seconds, 6)


def answered(model: Any, rtype: str, chunks: Iterable[Chunk], worker: str) -> Iterator[Done]:
    """The answers to ``chunks``, as early as ``model`` can hand them back: one by one (answered
    as they arrive, chunks overlapping: a served model), batch by batch (``answer_parts``), or
    chunk by chunk. The one choice for this process's model and for a Ray replica's."""
    if feature(model, "ANSWERS_EACH"):
        return answered_each(model, rtype, chunks, worker)
    if getattr(type(model), "answer_parts", None) is not None:
        return answered_parts(model, rtype, chunks, worker)
    return answered_chunks(model, rtype, chunks, worker)


def answered_chunks(model: Any, rtype: str, chunks: Iterable[Chunk], worker: str) -> Iterator[Done]:
    """Each chunk's answers, one chunk at a time, for a model without ``answer_parts``: the whole
    chunk is one :class:`Done` (the edge checks that it holds one answer per request).
    A chunk's ``seconds`` is the model's time answering it (the edge's time saving it excluded)."""
    for chunk in chunks:
        start = time.perf_counter()
        answers = list(getattr(model, rtype)([r for _, r in chunk]))
        yield Done(tuple(k for k, _ in chunk), answers, worker, time.perf_counter() - start, type(model).__name__)


def answered_parts(
    model: Any, rtype: str, chunks: Iterable[Chunk], worker: str, save_every: float = SAVE_EVERY
) -> Iterator[Done]:
    """The answers of a model declaring ``answer_parts(rtype, chunks)``, saved as they come.

    The model pulls lists of requests from ``chunks`` (it may pull the next before the current one
    is done, to keep its batch full across chunk boundaries: the HF model's decode loop) and
    yields ``(n, {index: answer})`` for the ``n``-th list pulled as each of its batches finishes
    (a forward pass, a finished generation row). What is sorted and batched together is still
    the chunk; what is persisted together is what arrived since the last :class:`Done`: one is
    yielded when a chunk is complete or ``save_every`` seconds of answers are waiting, so a kill
    loses at most that much work, plus the batches running. ``Done.chunks`` counts the chunks it
    completes (the edge's leases of a chunk end when its last answer is saved). A model should
    pull no further than it has room to work on: pulling a chunk leases it.

    (An optional method looked up here rather than a feature of the model contract, whose file is
    part of every model's code identity: declaring it there would change every cache key.)"""
    pulled: dict[int, tuple[Chunk, set[int]]] = {}

    def requests() -> Iterator[list[Request]]:
        for n, chunk in enumerate(chunks):
            pulled[n] = (chunk, set())
            yield [r for _, r in chunk]

    keys: list[str] = []
    answers: list[Any] = []
    ended, last, name = 0, time.perf_counter(), type(model).__name__
    for n, part in type(model).answer_parts(model, rtype, requests()):
        chunk, seen = pulled[n]
        for i, answer in part.items():
            if i in seen or not 0 <= i < len(chunk):
                raise _misanswered(
                    model, rtype, f"answered request {i} of a chunk of {len(chunk)} twice or out of range"
                )
            seen.add(i)
            keys.append(chunk[i][0])
            answers.append(answer)
        if len(seen) == len(chunk):
            del pulled[n]
            ended += 1
        now = time.perf_counter()
        if keys and (ended or now - last >= save_every):
            yield Done(tuple(keys), answers, worker, now - last, name, ended)
            keys, answers, ended, last = [], [], 0, time.perf_counter()
    if keys:  # answers of a chunk the model left short: saved, then the error
        yield Done(tuple(keys), answers, worker, time.perf_counter() - last, name, ended)
    if pulled:
        missing = sum(len(chunk) - len(seen) for chunk, seen in pulled.values())
        raise _misanswered(model, rtype, f"left {missing} {rtype} requests unanswered; it must answer each one")


def _misanswered(model: Any, rtype: str, what: str) -> Exception:
    from evalflow.errors import ModelError

    return ModelError(f"model {type(model).__name__}.answer_parts({rtype}) {what}")


def answered_each(model: Any, rtype: str, chunks: Iterable[Chunk], worker: str) -> Iterator[Done]:
    """The answers of a model declaring ``answer_each(rtype, requests, on_answer(index, answer))``
    (a served model with requests in flight), as they arrive: each :class:`Done` holds every answer
    that arrived since the last one, so the edge persists them in one transaction (a failed request
    loses nothing answered, a kill the last ``SETTLE`` seconds' answers), and under load the batches
    grow instead of the edge falling behind with one transaction per answer.

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
    started, ended, last = 0, 0, time.perf_counter()

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
        before = len(state.running)
        keys, answers = state.settle(_drain(inbox, SETTLE))
        ended += before - len(state.running)
        if keys:
            now = time.perf_counter()
            yield Done(tuple(keys), answers, worker, now - last, type(model).__name__, ended)
            last, ended = now, 0
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
