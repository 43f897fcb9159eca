"""Ray replicas of a model with ``answer_parts`` stream each batch's answers to the driver, which
saves them as they come (issue 38 item 2): a dying actor or a killed run loses the batches in
flight, not whole chunks, and an actor's replacement computes only what its chunk still lacks."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from evalflow.scale.answer_cache import CachedModel
from evalflow.scale.dispatch import SAVE_EVERY, Done
from tests.support.models import BatchingModel
from tests.support.scale_models import answered_batches
from tests.support.scale_runs import killing_the_holder, outcome, request_entries, run_once

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HELD = "tests.support.scale_models:HeldBatchingModel"
BATCH = BatchingModel.BATCH
CHUNK = 4 * BATCH  # four batches a chunk
REQUESTS = 80  # toy_mc, limit=20: 20 documents x 4 choices, five chunks
# seconds per request: a batch takes longer than SAVE_EVERY, so each answered batch is saved on its own
DELAY = 1.5 * SAVE_EVERY / BATCH


def saved(monkeypatch: pytest.MonkeyPatch) -> list[Done]:
    """Every Done the driver persists (one transaction each), in order."""
    seen: list[Done] = []
    accept = CachedModel._accept

    def recording(self: CachedModel, rtype: str, finished: Done, requests: Any) -> Any:
        seen.append(finished)
        return accept(self, rtype, finished, requests)

    monkeypatch.setattr(CachedModel, "_accept", recording)
    return seen


def test_replicas_stream_each_batch_to_the_driver(
    ray_cluster: str, toy_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_once(toy_library, tmp_path / "ref-cache", tmp_path / "reference", model={"type": HELD}, limit=20)
    dones = saved(monkeypatch)
    _, manifest = run_once(
        toy_library,
        tmp_path / "cache",
        tmp_path / "run",
        model={"type": HELD, "delay": DELAY},
        limit=20,
        workers=2,
        ray_address=ray_cluster,
        chunk_size=CHUNK,
    )
    assert manifest["inference"]["computed"] == REQUESTS
    chunks = REQUESTS // CHUNK
    # parts of a chunk were saved before the chunk ended, and each chunk's end was counted once
    assert len(dones) > chunks and any(d.chunks == 0 for d in dones), [(len(d.keys), d.chunks) for d in dones]
    assert sum(d.chunks for d in dones) == chunks == sum(w["chunks"] for w in manifest["workers"].values())
    keys = [k for d in dones for k in d.keys]
    assert len(keys) == len(set(keys)) == REQUESTS  # each answer saved once
    assert sorted(name.split("@")[0] for name in manifest["workers"]) == ["w0", "w1"]
    assert outcome(tmp_path / "run") == outcome(tmp_path / "reference")


def test_a_dead_actors_chunk_is_finished_by_its_replacement(
    ray_cluster: str, toy_library: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The first batch that is the 3rd of its chunk holds until its actor is killed: the two
    batches of that chunk answered before it are saved, so the replacement actor computes only
    the held batch and the one after it; every request is answered once more at most than in
    an uninterrupted run by the held batch alone (± one answered batch the kill cut short)."""

    run_once(toy_library, tmp_path / "ref-cache", tmp_path / "reference", model={"type": HELD}, limit=20)
    cache, hold, log = tmp_path / "cache", tmp_path / "hold", tmp_path / "batches"
    model = {"type": HELD, "delay": DELAY, "log": str(log), "hold": str(hold), "hold_batch": 3}
    with killing_the_holder(hold) as killed, caplog.at_level(logging.WARNING, logger="evalflow.scale.ray_workers"):
        _, manifest = run_once(
            toy_library,
            cache,
            tmp_path / "run",
            model=model,
            limit=20,
            workers=2,
            ray_address=ray_cluster,
            chunk_size=CHUNK,
        )
    assert len(killed) == 1 and killed[0]["requests"] == BATCH, killed
    assert [r for r in caplog.records if "died" in r.getMessage()], "the run never saw its worker die"
    assert manifest["inference"] == {"requests": REQUESTS, "computed": REQUESTS, "cached": 0}
    assert sum(w["chunks"] for w in manifest["workers"].values()) == REQUESTS // CHUNK
    assert request_entries(cache) == REQUESTS
    # answered by the models: every request once (the held batch never answered), plus at most one
    # batch whose answers the kill cut off on their way; re-dealing the whole chunk would add two
    answered = sum(answered_batches(log))
    assert REQUESTS <= answered <= REQUESTS + BATCH, answered
    assert outcome(tmp_path / "run") == outcome(tmp_path / "reference")
