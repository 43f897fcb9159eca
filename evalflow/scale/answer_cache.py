"""The inference edge: per-request memoization in front of a lazily loaded model.

:class:`CachedModel` implements the three request types. For each list of requests it answers what
the cache holds, sends only the misses to the real model, in chunks, and persists answers as they
return, one transaction per :class:`Done`: a whole chunk, or, for a model that hands answers back
batch by batch (``answer_parts``: the HF model's forward passes and decode rows; a served model's
requests), what arrived in the last ~0.1 s (``evalflow.scale.dispatch.SAVE_EVERY``). A killed run
loses at most the batches in flight (a model without ``answer_parts``: its chunk in flight), and any
later run (a larger ``limit``, another task with the same prompts, a resumed sweep) reuses the rest.

A request's key is ``fingerprint(model identity, request)``. It never contains batch size, rank or
worker count. The seed and repeat index are part of a sampled request (``Request.seed`` set), so k
samples stay k answers; for greedy requests the repeat index is dropped, as repeats are equal.
The real model is built on the first miss only: a fully cached run never loads weights.

A request counts as *computed* when this edge had the model answer it in this run, else as
*cached* (an answer from before the run, or another process's): a request two tasks share is
computed once and counted computed for both. The tokens of the generations the model computed are
counted once each, as they arrive (what the run paid for: ``evalflow.output.cost``). With
``read=False`` (``recompute``) the edge reads only the answers it computed itself in this run:
every other request goes to the model, and its answer is written over the entry it did not read
(no leases: each such process computes all it asks).

Processes sharing a cache folder (a parallel sweep, several runs at once) split the misses rather
than each computing all of them: a process leases a chunk of requests before sending it to the
model (:meth:`CacheStore.claim`), skips requests another live process holds, and at the end waits
for those, taking over any whose holder died. Duplicate work is thus limited to leases taken over
from a process that was still computing after ``lease_seconds``.

*Where* a chunk is answered is the ``dispatch``'s business (:mod:`evalflow.scale`): this process
(``workers=1``), or Ray actors (``workers>1``). Either way the misses are cut into the same chunks
(:func:`evalflow.scale.chunks.plan_chunks`: families of one context kept together), and this edge
alone writes the cache, as answers return; a chunk's lease ends in the transaction that persists
its last answer.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from evalflow.cache.fingerprint import fingerprint
from evalflow.cache.image_store import ImageStore, visual_refs, with_pixels
from evalflow.cache.store import CacheStore, Holder
from evalflow.core.records import REQUEST_TYPES, Finish, Generation, Request
from evalflow.core.tokens import add_tokens, token_totals
from evalflow.errors import ModelError
from evalflow.models.protocol import feature
from evalflow.scale.chunks import plan_chunks
from evalflow.scale.dispatch import Dispatch, Done, LocalDispatch, WorkerCounts
from evalflow.scale.progress import RequestProgress, report_progress

log = logging.getLogger(__name__)

__all__ = ["CachedModel", "InferenceCounts", "RequestProgress", "checked_answer", "request_key", "union_length"]


_T = TypeVar("_T")


@dataclass
class InferenceCounts:
    """Requests sent to ``inference`` vs answered by the model vs from the cache, what each
    model replica did (``workers``: name -> chunks, requests, seconds), and the generations the
    model computed in this run with their tokens (each request once, however many tasks asked it)."""

    requests: int = 0
    computed: int = 0
    cached: int = 0
    model: Any = None  # what a loaded model says about itself (``describe()``, e.g. a server's /models)
    workers: dict[str, WorkerCounts] = field(default_factory=dict)
    answering: list[tuple[float, float]] = field(default_factory=list)  # (start, end) of each answered chunk
    servers: dict[str, int] = field(default_factory=dict)  # served models: HTTP requests each server answered
    computed_generations: int = 0  # generate_until answers the model gave in this run
    computed_tokens: dict[str, Any] = field(default_factory=lambda: token_totals(()))  # theirs (core.tokens)

    @property
    def answering_seconds(self) -> float:
        """Wall time during which some replica was answering: the union of the chunks' intervals.
        Throughput over this window excludes what is not inference (Ray's start, model loads,
        other stages), which a difference of total wall times measures only as noisily as the
        slowest of those."""
        return union_length(self.answering)

    def add_generations(self, answers: Sequence[Any]) -> None:
        """Count generations the model just computed (a plain ``str``: tokens unknown)."""
        finishes = [a.finish if isinstance(a, Generation) else Finish() for a in answers]
        self.computed_generations += len(finishes)
        self.computed_tokens = add_tokens(self.computed_tokens, token_totals(finishes))

    def served_by_stage(self, n: int) -> None:
        """``n`` requests of a task whose whole inference stage came from the stage cache: they
        never reach the edge, but they are cached requests all the same."""
        self.requests += n
        self.cached += n


def union_length(intervals: Sequence[tuple[float, float]]) -> float:
    """Total length covered by ``intervals`` (overlaps counted once).

    >>> union_length([(0, 2), (1, 3), (5, 6)])
    4.0
    """
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def request_key(model_identity: str, request: Request) -> str:
    if request.seed is None and request.repeat:
        request = dataclasses.replace(request, repeat=0)
    return "request:" + fingerprint((model_identity, request))


@dataclass
class CachedModel:
    """A LanguageModel that answers from the cache and delegates misses to ``load()``'s model."""

    store: CacheStore
    identity: str | None  # None: a model object with no identity; answers are neither read nor persisted
    load: Callable[[], Any]
    chunk_size: int = 64
    on_chunk: Callable[[int, int, float], None] | None = field(
        default_factory=lambda: RequestProgress()
    )  # (done, total, chunk seconds)
    counts: InferenceCounts = field(default_factory=InferenceCounts)
    lease_seconds: float = 1800.0  # after this, a lease held by a silent process is taken over
    poll_seconds: float = 0.05  # first wait for requests another process computes (doubles to 1 s)
    holder: Holder = field(default_factory=Holder)
    identity_data: Any = None  # the plain data ``identity`` hashes (recorded in the manifest)
    dispatch: Dispatch | None = None  # None: the model in this process (LocalDispatch)
    images: Any = None  # the ImageStore misses' image references are read from (None: this store's)
    read: bool = True  # False: answers from before this run are not read but computed anew (recompute)
    _model: Any = None
    _computed: set[str] = field(default_factory=set)  # keys of the requests the model answered in this run
    _pooled: dict[str, Any] = field(default_factory=dict)  # prefetched: key -> answer
    _pool_keys: dict[int, tuple[Request, str]] = field(
        default_factory=dict
    )  # prefetched: id(request) -> (request, key)

    def loglikelihood(self, requests: Sequence[Request]) -> list[Any]:
        return self._answer("loglikelihood", requests)

    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[Any]:
        return self._answer("loglikelihood_rolling", requests)

    def generate_until(self, requests: Sequence[Request]) -> list[Any]:
        return self._answer("generate_until", requests)

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = self.load()
            self.counts.model = feature(self._model, "describe")()
        return self._model

    @property
    def dispatcher(self) -> Dispatch:
        if self.dispatch is None:
            self.dispatch = LocalDispatch(lambda: self.model)
        return self.dispatch

    def close(self) -> None:
        """End the model replicas (Ray actors) of this run, if any were started, first noting
        how many requests each server answered."""
        servers = dict(self.dispatch.served_counts()) if self.dispatch is not None else {}
        if self._model is not None:
            servers.update(feature(self._model, "served_counts")() or {})
        self.counts.servers = dict(sorted(servers.items()))
        if self.dispatch is not None:
            self.dispatch.close()
        self._pooled.clear()
        self._pool_keys.clear()
        getattr(self.on_chunk, "close", lambda: None)()  # a progress bar or heartbeat ends with the run

    def recount(self, final_run: Callable[[], _T]) -> _T:
        """``final_run()`` (the whole run after ``stop_at_stderr``'s rounds, its stages the rounds'),
        counted as the run: its requests, of which those the model answered in any round computed,
        the rest cached; the rounds' own request counts (each round asked again for the documents
        before it) are dropped."""
        self.counts.requests = self.counts.computed = self.counts.cached = 0
        result = final_run()
        self.counts.computed = min(len(self._computed), self.counts.requests)
        self.counts.cached = self.counts.requests - self.counts.computed
        return result

    def prefetch(self, requests: Sequence[Request]) -> None:
        """Answer the requests of several tasks as one pool, before each task's inference stage
        asks for its own: the model sees one list per request type (sorted and chunked across
        task boundaries, so a server's slots stay full and a local batch may mix tasks), each
        chunk persisted as it returns, as ever. The answers are held here until a task's
        ``_answer`` takes them, which counts them for that task (computed or cached) as if it had
        asked alone; answers are the same, as a request's answer depends on the request only."""
        if self.identity is None:  # no identity: nothing persisted, so no pool to share
            return
        for rtype in REQUEST_TYPES:
            of_type = [r for r in requests if r.type == rtype]
            if of_type:
                keys = [request_key(self.identity, r) for r in of_type]
                self._pool_keys.update(
                    (id(r), (r, k)) for r, k in zip(of_type, keys)
                )  # the stage asks with these objects
                answers = self._resolve(rtype, keys, of_type)
                self._pooled.update((k, answers[k]) for k in keys)

    def _answer(self, rtype: str, requests: Sequence[Request]) -> list[Any]:
        if self.identity is None:
            keys = [f"volatile:{i}" for i in range(len(requests))]
        else:
            keys = [self._key(self.identity, r) for r in requests]
        answers: dict[str, Any] = {}
        for key in dict.fromkeys(keys) if self._pooled else ():
            if key in self._pooled:
                answers[key] = self._pooled.pop(key)
        rest = [(k, r) for k, r in zip(keys, requests) if k not in answers]
        if rest:
            answers.update(self._resolve(rtype, [k for k, _ in rest], [r for _, r in rest]))
        computed_here = sum(1 for k in keys if k in self._computed)
        self.counts.requests += len(requests)
        self.counts.computed += computed_here
        self.counts.cached += len(requests) - computed_here
        return [answers[k] for k in keys]

    def _key(self, identity: str, request: Request) -> str:
        """``request``'s key: as the pool computed it when it is the very object pooled."""
        held = self._pool_keys.get(id(request))
        return held[1] if held is not None and held[0] is request else request_key(identity, request)

    def _resolve(self, rtype: str, keys: Sequence[str], requests: Sequence[Request]) -> dict[str, Any]:
        """Every key's answer, from the cache or the model (the misses, deduplicated, longest
        first); the keys the model answered join ``_computed``."""
        answers: dict[str, Any] = {}
        if self.identity is not None:  # not reading (recompute): only what this run computed
            answers.update(self.store.get_many(keys if self.read else [k for k in keys if k in self._computed]))
        todo = {k: r for k, r in zip(keys, requests) if k not in answers}  # deduplicated misses
        ordered = _length_ordered(list(todo.items()))
        if ordered:  # the start (0/total): a log off a terminal shows the run alive
            self._progress(0, len(ordered), 0.0)
        if self.identity is None or not self.read:
            self._computed |= self._compute_alone(rtype, ordered, answers)
        else:
            self._computed |= self._compute_shared(rtype, ordered, answers)
        return answers

    def _compute_alone(self, rtype: str, ordered: list[tuple[str, Request]], answers: dict[str, Any]) -> set[str]:
        done, by_key = 0, dict(ordered)
        for finished in self.dispatcher.map(rtype, map(self._with_pixels, plan_chunks(ordered, self.chunk_size))):
            answers.update(self._accept(rtype, finished, by_key))
            done += len(finished.keys)
            self._progress(done, len(ordered), finished.seconds)
        return {k for k, _ in ordered}

    def _compute_shared(self, rtype: str, ordered: list[tuple[str, Request]], answers: dict[str, Any]) -> set[str]:
        """Compute the misses this process can lease, chunk by chunk; then wait for the ones other
        processes hold, taking over those whose holder died. Returns the keys computed here."""
        store = self.store
        by_key = dict(ordered)
        pending = [k for k, _ in ordered]
        mine: set[str] = set()
        outstanding: set[str] = set()  # leased here, not yet persisted: released if this fails
        resolved, wait = 0, self.poll_seconds
        with store.heartbeat(self.holder):
            while pending:
                deferred: list[str] = []
                progress = False

                def leased(keys: list[str], deferred: list[str]) -> Any:
                    """Each planned chunk as far as it can be leased now, claimed only when a
                    replica is ready for it; the keys another process holds go to ``deferred``."""
                    nonlocal progress, resolved
                    for chunk in plan_chunks([(k, by_key[k]) for k in keys], self.chunk_size):
                        claim = store.claim(iter([k for k, _ in chunk]), self.holder, len(chunk), self.lease_seconds)
                        deferred.extend(claim.busy)
                        answers.update(claim.found)
                        resolved += len(claim.found)
                        progress = progress or bool(claim.found or claim.claimed)
                        if claim.claimed:
                            outstanding.update(claim.claimed)
                            yield self._with_pixels([(k, by_key[k]) for k in claim.claimed])

                try:
                    for finished in self.dispatcher.map(rtype, leased(pending, deferred)):
                        answers.update(self._accept(rtype, finished, by_key))
                        outstanding.difference_update(finished.keys)
                        mine.update(finished.keys)
                        resolved += len(finished.keys)
                        self._progress(resolved, len(ordered), finished.seconds)
                except BaseException:
                    store.release(outstanding)  # let other processes take these requests
                    raise
                pending = deferred
                if pending and not progress:
                    if wait == self.poll_seconds:
                        log.info("waiting for %d %s requests another process is computing", len(pending), rtype)
                    time.sleep(wait)
                    wait = min(1.0, wait * 2)
                else:
                    wait = self.poll_seconds
        return mine

    def _progress(self, done: int, total: int, seconds: float) -> None:
        """A list's progress, to ``on_chunk`` (the log or bar) and to the run's sink (its events file)."""
        if self.on_chunk:
            self.on_chunk(done, total, seconds)
        report_progress(done, total)

    def _with_pixels(self, chunk: list[tuple[str, Request]]) -> list[tuple[str, Request]]:
        """The chunk as the model receives it: image references replaced by the images (read from
        the cache's image table), so a model sees PIL images as under lm-eval."""
        if not any(visual_refs(r) for _, r in chunk):
            return chunk
        if self.images is None:
            self.images = ImageStore(self.store)
        return [(k, with_pixels(r, self.images)) for k, r in chunk]

    def _accept(self, rtype: str, finished: Done, requests: Mapping[str, Request]) -> dict[str, Any]:
        """Returned answers (a chunk, or a part of one), every one's shape checked, counted, and only then persisted
        in one transaction: a malformed answer must never reach the cache, where a fixed model
        would still be served it."""
        if len(finished.answers) != len(finished.keys):
            raise ModelError(
                f"model {finished.model}.{rtype} returned {len(finished.answers)} responses for "
                f"{len(finished.keys)} requests; it must return exactly one response per request, in order"
            )
        fresh = {
            key: checked_answer(finished.model, rtype, requests[key], answer)
            for key, answer in zip(finished.keys, finished.answers)
        }
        if rtype == "generate_until":
            self.counts.add_generations(list(fresh.values()))
        now = time.perf_counter()
        self.counts.answering.append((now - finished.seconds, now))
        self.counts.workers.setdefault(finished.worker, WorkerCounts()).add(finished)
        if self.identity is not None:  # not reading: over the entries this run did not read
            self.store.put_many(fresh, tag="request", replace=not self.read)
        return fresh


_SHAPES = {
    "loglikelihood": "a (logprob: float, is_greedy: bool) pair",
    "loglikelihood_rolling": "a float (the text's total logprob)",
    "generate_until": "a str (the generated text) or an evalflow.core.records.Generation",
}


def checked_answer(model: Any, rtype: str, request: Request, answer: Any) -> Any:
    """``answer`` as plain JSON data if it has the shape of ``rtype``'s answers, else a ModelError
    naming the model (an object, or its class name when it answered in another process), the
    request type, the request and the bad value."""
    name = model if isinstance(model, str) else type(model).__name__
    plain = _plain(answer)
    if rtype == "loglikelihood":
        ok = isinstance(plain, list) and len(plain) == 2 and _is_number(plain[0]) and isinstance(plain[1], bool)
    elif rtype == "loglikelihood_rolling":
        ok = _is_number(plain)
    else:
        ok = isinstance(plain, str) or (isinstance(plain, Generation) and isinstance(plain.text, str))
    if not ok:
        raise ModelError(
            f"model {name}.{rtype} returned {answer!r} (type {type(answer).__name__}) for request "
            f"{_short(request.args)}; each answer must be {_SHAPES[rtype]}. Nothing of this chunk was cached; "
            "fix the model and run again."
        )
    return plain


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _short(args: Any, limit: int = 200) -> str:
    text = repr(args)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _length_order(request: Request) -> tuple[Any, ...]:
    """Longest first, and continuations of one context together (lm-eval's order, and what lets a
    model share a context across its continuations)."""
    text = request.args[0] if request.args else ""
    return (-len(text) if isinstance(text, str) else 0, str(request.args[:1]), str(request.args[1:]))


def _length_ordered(items: list[tuple[str, Request]]) -> list[tuple[str, Request]]:
    """``items`` sorted by :func:`_length_order`, in the same order, but writing out a long
    context only to break a tie of length between two different contexts (a 5-shot context is
    several kB, shared by its continuations): requests grouped by context, contexts ordered by
    length then by their written form, each context's requests by the rest of their arguments."""
    groups: dict[str, list[tuple[str, Request]]] = {}
    for kv in items:
        args = kv[1].args
        if not args or type(args[0]) is not str:  # no context text: the full key, for all
            return sorted(items, key=lambda kv: _length_order(kv[1]))
        groups.setdefault(args[0], []).append(kv)
    by_length: dict[int, list[str]] = {}
    for text in groups:
        by_length.setdefault(len(text), []).append(text)
    out: list[tuple[str, Request]] = []
    for length in sorted(by_length, reverse=True):
        texts = by_length[length]
        if len(texts) > 1:
            texts.sort(key=lambda text: str((text,)))
        for text in texts:
            group = groups[text]
            if len(group) > 1:
                group.sort(key=lambda kv: str(kv[1].args[1:]))
            out.extend(group)
    return out


def _plain(answer: Any) -> Any:
    """Responses as JSON data: (logprob, is_greedy) pairs become lists, numpy scalars floats."""
    if isinstance(answer, (tuple, list)):
        return [_plain(a) for a in answer]
    if hasattr(answer, "item"):
        return answer.item()
    return answer
