"""Chunks keep families together and do not depend on the worker count."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from evalflow.dag.inference import _length_order
from evalflow.records import Request
from evalflow.scale.chunks import family, plan_chunks


def _requests(shape: list[int]) -> list[tuple[int, Request]]:
    """``shape[i]`` continuations for context i, in the edge's order."""
    reqs = [Request("loglikelihood", (f"context {i} " + "x" * (i % 3), f" choice {j}")) for i, n in enumerate(shape) for j in range(n)]
    return list(enumerate(sorted(reqs, key=_length_order)))


@given(st.lists(st.integers(1, 9), max_size=30), st.integers(1, 12))
def test_a_family_is_never_split_and_order_is_kept(shape: list[int], chunk_size: int) -> None:
    ordered = _requests(shape)
    chunks = plan_chunks(ordered, chunk_size)
    assert [kv for chunk in chunks for kv in chunk] == ordered  # every request once, in order
    where = {}
    for n, chunk in enumerate(chunks):
        assert chunk
        for _, request in chunk:
            assert where.setdefault(family(request), n) == n  # one chunk per family
        families = {family(r) for _, r in chunk}
        assert len(chunk) <= chunk_size or len(families) == 1  # oversize only for one big family


def test_rolling_requests_stand_alone_and_fill_chunks() -> None:
    ordered = [(i, Request("loglikelihood_rolling", ("same text",))) for i in range(5)]
    assert [len(c) for c in plan_chunks(ordered, 2)] == [2, 2, 1]
