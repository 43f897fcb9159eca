"""Chunks keep families together and do not depend on the worker count."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from evalflow.core.records import Request
from evalflow.scale.answer_cache import _length_order
from evalflow.scale.chunks import GENERATED_WEIGHT, family, plan_chunks, work


def _requests(shape: list[int]) -> list[tuple[int, Request]]:
    """``shape[i]`` continuations for context i, in the edge's order."""
    reqs = [
        Request("loglikelihood", (f"context {i} " + "x" * (i % 3), f" choice {j}"))
        for i, n in enumerate(shape)
        for j in range(n)
    ]
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


def test_chunks_close_at_the_token_budget_before_the_request_cap() -> None:
    long_context = "x" * 4000  # ~1,000 tokens a request
    ordered = [(i, Request("loglikelihood", (f"{i} {long_context}", " a"))) for i in range(40)]
    chunks = plan_chunks(ordered, 512, budget=10_000)
    assert [len(c) for c in chunks] == [9, 9, 9, 9, 4]  # 9 * 1,002 tokens fit in 10,000, 10 do not
    short = [(i, Request("loglikelihood", (f"Q{i}:", " a"))) for i in range(1200)]
    assert [len(c) for c in plan_chunks(short, 512)] == [512, 512, 176]  # short requests: the cap decides


def test_generation_counts_its_new_tokens() -> None:
    prompt = "y" * 400  # 100 tokens
    greedy = [(i, Request("generate_until", (f"{i}{prompt}", {"until": ["\n"]}))) for i in range(100)]
    few = [(i, Request("generate_until", (f"{i}{prompt}", {"max_gen_toks": 8}))) for i in range(100)]
    assert work(greedy[0][1]) == 101 + GENERATED_WEIGHT * 256 and work(few[0][1]) == 101 + GENERATED_WEIGHT * 8
    budget = 10 * work(greedy[0][1])
    assert max(len(c) for c in plan_chunks(greedy, 512)) == 15  # the defaults: 256 new tokens, ~15 a chunk
    assert {len(c) for c in plan_chunks(greedy, 512, budget=budget)} == {10}
    assert len(plan_chunks(few, 512, budget=budget)) == 1  # 8 new tokens each: all 100 fit


def test_a_family_over_the_budget_is_a_chunk_of_its_own() -> None:
    big = [(i, Request("loglikelihood", ("z" * 40_000, f" {i}"))) for i in range(3)]
    small = [(9, Request("loglikelihood", ("q", " a")))]
    assert [len(c) for c in plan_chunks(small + big + small, 512, budget=1_000)] == [1, 3, 1]


def test_a_served_model_gets_small_chunks_unless_the_run_sets_them() -> None:
    """Chunk size defaults by the model's kind, read from its class (never built): a served model
    (answering each request as it arrives) 64, any other 512; a set ``chunk_size`` wins for both."""
    from types import SimpleNamespace

    from evalflow.models.registry import model_class
    from evalflow.run.parts import chunk_size

    unset, eight = SimpleNamespace(chunk_size=None), SimpleNamespace(chunk_size=8)
    assert [chunk_size(unset, model_class(t)) for t in ("openai_completions", "openai_chat", "dummy", "hf")] == [
        64,
        64,
        512,
        512,
    ]
    assert chunk_size(eight, model_class("openai_completions")) == chunk_size(eight, model_class("dummy")) == 8
