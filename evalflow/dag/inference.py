"""The inference edge: per-request memoization in front of a lazily loaded model.

:class:`CachedModel` implements the three request types. For each list of requests it answers what
the cache holds, sends only the misses to the real model, in chunks, and persists every chunk in
one transaction as soon as it returns: a killed run loses at most the chunk in flight, and any
later run (a larger ``limit``, another task with the same prompts, a resumed sweep) reuses the rest.

A request's key is ``fingerprint(model identity, request)``. It never contains batch size, rank or
worker count. The seed and repeat index are part of a sampled request (``Request.seed`` set), so k
samples stay k answers; for greedy requests the repeat index is dropped, as repeats are equal.
The real model is built on the first miss only: a fully cached run never loads weights.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from evalflow.cache.fingerprint import fingerprint
from evalflow.cache.store import MISSING, CacheStore
from evalflow.errors import ModelError
from evalflow.records import Request


@dataclass
class InferenceCounts:
    """Requests sent to ``inference`` vs answered by the model vs from the cache."""

    requests: int = 0
    computed: int = 0
    cached: int = 0
    seconds_in_model: float = 0.0


def request_key(model_identity: str, request: Request) -> str:
    if request.seed is None:
        request = dataclasses.replace(request, repeat=0)
    return "request:" + fingerprint((model_identity, request))


@dataclass
class CachedModel:
    """A LanguageModel that answers from the cache and delegates misses to ``load()``'s model."""

    store: CacheStore | None  # None: answers are not persisted (a model object with no identity)
    identity: str
    load: Callable[[], Any]
    chunk_size: int = 64
    on_chunk: Callable[[int, int], None] | None = None  # (done, total) progress callback
    counts: InferenceCounts = field(default_factory=InferenceCounts)
    _model: Any = None

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
        return self._model

    def _answer(self, rtype: str, requests: Sequence[Request]) -> list[Any]:
        keys = [request_key(self.identity, r) for r in requests]
        answers: dict[str, Any] = {}
        if self.store is not None:
            for key in dict.fromkeys(keys):
                value = self.store.get(key)
                if value is not MISSING:
                    answers[key] = value
        todo = {k: r for k, r in zip(keys, requests) if k not in answers}  # deduplicated misses
        self.counts.requests += len(requests)
        self.counts.cached += len(requests) - sum(1 for k in keys if k in todo)
        ordered = sorted(todo.items(), key=lambda kv: _length_order(kv[1]))
        for start in range(0, len(ordered), self.chunk_size):
            chunk = ordered[start : start + self.chunk_size]
            answers.update(self._compute(rtype, chunk))
            if self.on_chunk:
                self.on_chunk(min(start + self.chunk_size, len(ordered)), len(ordered))
        self.counts.computed += sum(1 for k in keys if k in todo)
        return [answers[k] for k in keys]

    def _compute(self, rtype: str, chunk: list[tuple[str, Request]]) -> dict[str, Any]:
        t0 = time.perf_counter()
        got = list(getattr(self.model, rtype)([r for _, r in chunk]))
        self.counts.seconds_in_model += time.perf_counter() - t0
        if len(got) != len(chunk):
            raise ModelError(
                f"model {type(self.model).__name__}.{rtype} returned {len(got)} responses for "
                f"{len(chunk)} requests; it must return exactly one response per request, in order"
            )
        fresh = {key: _plain(answer) for (key, _), answer in zip(chunk, got)}
        if self.store is not None:
            self.store.put_many(fresh, tag="request")
        return fresh


def _length_order(request: Request) -> tuple[Any, ...]:
    """Longest first, and continuations of one context together (lm-eval's order, and what lets a
    model share a context across its continuations)."""
    text = request.args[0] if request.args else ""
    return (-len(text) if isinstance(text, str) else 0, str(request.args[:1]), str(request.args[1:]))


def _plain(answer: Any) -> Any:
    """Responses as JSON data: (logprob, is_greedy) pairs become lists, numpy scalars floats."""
    if isinstance(answer, (tuple, list)):
        return [_plain(a) for a in answer]
    if hasattr(answer, "item"):
        return answer.item()
    return answer
