"""Which requests travel together to a model replica (pure).

A chunk is the unit a replica answers and the edge persists in one transaction. Requests that
share a context (the continuations of one multiple-choice question, the k samples of one prompt)
form a *family*: a model computes their shared prefix once only if they arrive together, so a
chunk never splits a family. Chunks depend only on the ordered misses and ``chunk_size``, never on
the worker count, so every replica count batches exactly the same requests together.

>>> from evalflow.records import Request
>>> reqs = [Request("loglikelihood", ("Q1", c)) for c in "abc"] + [Request("loglikelihood", ("Q2", "d"))]
>>> [[r.args for _, r in c] for c in plan_chunks(list(enumerate(reqs)), 2)]
[[('Q1', 'a'), ('Q1', 'b'), ('Q1', 'c')], [('Q2', 'd')]]
"""

from __future__ import annotations

from typing import Any, Sequence, TypeVar

from evalflow.records import Request

K = TypeVar("K")


def family(request: Request) -> Any:
    """What a request shares its prefix with: its context and its images, if any (one prompt
    shown with different images is different input); a rolling request stands alone."""
    if request.type == "loglikelihood_rolling" or not request.args:
        return None
    context = request.args[0] if isinstance(request.args[0], str) else repr(request.args[0])
    last = request.args[-1]
    if len(request.args) > 2 and isinstance(last, dict) and "visual" in last:
        return (context, tuple(getattr(v, "digest", repr(v)) for v in last["visual"]))
    return context


def plan_chunks(ordered: Sequence[tuple[K, Request]], chunk_size: int) -> list[list[tuple[K, Request]]]:
    """Consecutive runs of ``ordered`` of at most ``chunk_size`` requests, except that a family
    (adjacent requests with one context) is never split: a chunk closes early rather than cut
    one, and a family larger than ``chunk_size`` is a chunk of its own."""
    chunks: list[list[tuple[K, Request]]] = []
    current: list[tuple[K, Request]] = []
    start = 0
    while start < len(ordered):
        fam = family(ordered[start][1])
        end = start + 1
        while fam is not None and end < len(ordered) and family(ordered[end][1]) == fam:
            end += 1
        members = list(ordered[start:end])
        if current and len(current) + len(members) > chunk_size:
            chunks.append(current)
            current = []
        current.extend(members)
        start = end
    if current:
        chunks.append(current)
    return chunks
