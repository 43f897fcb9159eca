"""A served model's Ray replica answers its queued chunks concurrently (``max_concurrency``), so
its server does not drain at chunk boundaries; a model of weights still answers one at a time.
Checked on the actor options handed to Ray (no cluster needed)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from evalflow.scale.ray_workers import QUEUED_OVERLAPPING, RayDispatch


class FakeRay:
    """``ray.remote(cls).options(**options).remote(*args)``, keeping the options."""

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    def remote(self, *args: Any) -> FakeRay:
        return self

    def options(self, **options: Any) -> FakeRay:
        self.seen = options
        return self

    # what RayDispatch._start needs besides: a cluster, and actors that are ready at once
    ready = property(lambda self: self)
    init_args: ClassVar[dict[str, Any]] = {}

    def is_initialized(self) -> bool:
        return False

    def init(self, **args: Any) -> None:
        self.init_args = args

    def cluster_resources(self) -> dict[str, float]:
        return {"CPU": 8.0}

    def get(self, refs: Any) -> Any:
        return refs


@pytest.mark.parametrize(("overlap", "expected"), [(True, QUEUED_OVERLAPPING), (False, None)])
def test_actor_concurrency(overlap: bool, expected: int | None) -> None:
    ray = FakeRay()
    RayDispatch({"type": "dummy"}, 2, overlap=overlap)._spawn(ray, 0)
    assert ray.seen.get("max_concurrency") == expected
    assert ray.seen["num_cpus"] == 1


def test_only_models_answering_each_request_overlap() -> None:
    """The app sets ``overlap`` from ``ANSWERS_EACH``: served models have it, HF models do not."""
    from evalflow.models.protocol import feature
    from evalflow.models.registry import model_class

    assert feature(model_class("openai_completions"), "ANSWERS_EACH") and feature(
        model_class("openai_chat"), "ANSWERS_EACH"
    )
    assert not feature(model_class("hf"), "ANSWERS_EACH") and not feature(model_class("dummy"), "ANSWERS_EACH")


def test_unset_ray_address_starts_a_ray_of_the_runs_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray's own default would join any cluster this machine runs (another job's too)."""
    from evalflow.scale import ray_workers

    ray = FakeRay()
    monkeypatch.setattr(ray_workers, "import_ray", lambda: ray)
    RayDispatch({"type": "dummy"}, 2)._start()
    assert ray.init_args["address"] == "local"
    ray = FakeRay()
    monkeypatch.setattr(ray_workers, "import_ray", lambda: ray)
    RayDispatch({"type": "dummy"}, 2, address="auto")._start()
    assert ray.init_args["address"] == "auto"


def test_chunks_are_dealt_to_each_actor_in_turn() -> None:
    """Every actor gets its first chunk before any gets its second (each chunk is leased as it is
    dealt, which takes a few ms), and none gets more than ``queued``; then dealing stops when the
    chunks run out."""
    dealt: list[int] = []

    class Actor:
        def __init__(self, index: int) -> None:
            self.answer = self
            self.index = index

        def options(self, num_returns: str) -> Actor:
            assert num_returns == "streaming"  # answers come back as the replica's model hands them over
            return self

        def remote(self, rtype: str, chunk: list[Any]) -> object:
            dealt.append(self.index)
            return object()

    dispatch = RayDispatch({"type": "openai_completions"}, 2, overlap=True)
    dispatch._actors = {0: (0, Actor(0)), 1: (0, Actor(1))}
    chunks = iter([[("k", None)]] * (2 * QUEUED_OVERLAPPING + 1))
    inflight: dict[Any, Any] = {}
    dispatch._deal("loglikelihood", inflight, lambda: next(chunks, None))
    assert dealt == [0, 1] * QUEUED_OVERLAPPING
    del inflight[next(k for k, v in inflight.items() if v[0] == 1)]  # actor 1 finished a chunk
    dispatch._deal("loglikelihood", inflight, lambda: next(chunks, None))
    dispatch._deal("loglikelihood", inflight, lambda: next(chunks, None))
    assert dealt[2 * QUEUED_OVERLAPPING :] == [1]
