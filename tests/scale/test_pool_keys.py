"""The pool hands its request keys to the tasks' inference stages (``CachedModel.prefetch`` then
``_answer``): each request object is keyed once, an equal request that is another object is keyed
again, and answers and cache entries are those of a run without the pool."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import ClassVar

import pytest

from evalflow.cache.store import CacheStore
from evalflow.core.records import Request
from evalflow.scale import answer_cache
from evalflow.scale.answer_cache import CachedModel, request_key


class Lengths:
    """Answers a log-likelihood request with minus its continuation's length (greedy)."""

    def __init__(self) -> None:
        self.calls = 0

    def loglikelihood(self, requests):
        self.calls += len(requests)
        return [(-float(len(r.args[1])), True) for r in requests]


def requests(task: str) -> list[Request]:
    return [Request("loglikelihood", (f"{task} question {i}", f" {c}")) for i in range(5) for c in ("a", "bb", "ccc")]


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[Request]:
    """Every request the edge computes a key for."""
    keyed: list[Request] = []

    def counting(identity: str, request: Request) -> str:
        keyed.append(request)
        return request_key(identity, request)

    monkeypatch.setattr(answer_cache, "request_key", counting)
    return keyed


def test_each_pooled_request_is_keyed_once(tmp_path: Path, counted: list[Request]) -> None:
    model = Lengths()
    edge = CachedModel(CacheStore(tmp_path / "c"), "m", lambda: model, on_chunk=None)
    a, b = requests("A"), requests("B")
    edge.prefetch(a + b)
    assert len(counted) == 30 and model.calls == 30
    got = edge.loglikelihood(a), edge.loglikelihood(b)
    assert len(counted) == 30  # the stages' keys came from the pool
    assert got == tuple([[-float(len(r.args[1])), True] for r in rs] for rs in (a, b))
    assert (edge.counts.requests, edge.counts.computed, edge.counts.cached) == (30, 30, 0)


def test_an_equal_request_of_another_object_is_keyed_again(tmp_path: Path, counted: list[Request]) -> None:
    """The hand-over is by object: a copy gets its own key (the same one), and its answer from the pool."""
    model = Lengths()
    edge = CachedModel(CacheStore(tmp_path / "c"), "m", lambda: model, on_chunk=None)
    a = requests("A")
    edge.prefetch(a)
    copies = [dataclasses.replace(r) for r in a]
    assert edge.loglikelihood(copies) == [[-float(len(r.args[1])), True] for r in a]
    assert len(counted) == 30 and model.calls == 15


def test_pooled_cache_entries_equal_unpooled_ones(tmp_path: Path) -> None:
    a, b = requests("A"), requests("B")
    pooled = CachedModel(CacheStore(tmp_path / "p"), "m", lambda: Lengths(), on_chunk=None)
    pooled.prefetch(a + b)
    pooled.loglikelihood(a), pooled.loglikelihood(b)
    alone = CachedModel(CacheStore(tmp_path / "a"), "m", lambda: Lengths(), on_chunk=None)
    alone.loglikelihood(a), alone.loglikelihood(b)
    keys = [request_key("m", r) for r in a + b]
    assert pooled.store.get_many(keys) == alone.store.get_many(keys) and len(alone.store.get_many(keys)) == 30


def test_the_run_heap_is_left_out_of_gc_while_the_model_answers(toy_library: Path, tmp_path: Path) -> None:
    """``app.frozen_heap``: while the model answers, what the run held before is frozen (a full
    collection would walk it all, pausing a served client's event loop); afterwards it is not."""
    import gc

    from evalflow import evaluate

    class Recording(Lengths):
        frozen: ClassVar[list[int]] = []

        def loglikelihood(self, requests):
            self.frozen.append(gc.get_freeze_count())
            return super().loglikelihood(requests)

    model = Recording()
    evaluate(
        "toy_mc",
        model,
        output_dir=tmp_path / "run",
        include_path=[str(toy_library)],
        cache_dir=str(tmp_path / "c"),
        bootstrap_iters=0,
        limit=4,
    )
    assert model.frozen and all(n > 1000 for n in model.frozen)
    assert gc.get_freeze_count() == 0
