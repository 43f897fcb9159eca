"""Progress and counters: the rate is right when everything fits in one chunk, and a fully cached
run's manifest counts the requests it reused."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from evalflow.dag.inference import CachedModel, RequestProgress
from evalflow.models.dummy import DummyModel
from evalflow.records import Request
from tests.scale.helpers import run_once


def test_one_chunk_reports_its_real_rate(caplog: pytest.LogCaptureFixture) -> None:
    progress = RequestProgress(stream=io.StringIO(), clock=lambda: 500.0)  # no time passes but the chunk's own
    with caplog.at_level(logging.INFO, logger="evalflow.dag.inference"):
        progress(64, 64, 2.0)  # all 64 requests in one chunk that took 2 s
    assert [r.getMessage() for r in caplog.records] == ["inference: 64/64 requests, 32.0 requests/s"]


def test_the_edge_reports_chunk_durations_so_no_run_says_zero(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    class Slowish(DummyModel):
        def loglikelihood(self, requests):  # type: ignore[no-untyped-def]
            import time

            time.sleep(0.05)
            return super().loglikelihood(requests)

    from evalflow.cache.store import CacheStore

    store = CacheStore(tmp_path)
    edge = CachedModel(store, "slowish", lambda: Slowish(), chunk_size=64, on_chunk=RequestProgress(stream=io.StringIO()))
    with caplog.at_level(logging.INFO, logger="evalflow.dag.inference"):
        edge.loglikelihood([Request("loglikelihood", (f"q{i}", " a")) for i in range(10)])
    store.close()
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("inference:")]
    assert line.startswith("inference: 10/10 requests, ") and " 0.0 requests/s" not in line
    assert float(line.split(", ")[1].split()[0]) > 0


def test_a_fully_cached_run_counts_its_cached_requests(toy_library: Path, tmp_path: Path) -> None:
    _, first = run_once(toy_library, tmp_path / "cache", tmp_path / "a", task=["toy_mc", "toy_gen"])
    _, again = run_once(toy_library, tmp_path / "cache", tmp_path / "b", task=["toy_mc", "toy_gen"])
    assert first["inference"] == {"requests": 200, "computed": 200, "cached": 0}
    assert again["inference"] == {"requests": 200, "computed": 0, "cached": 200}
    assert again["workers"] == {} and sum(w["requests"] for w in first["workers"].values()) == 200
    # one task served whole from the stage cache, the other's requests from the request cache
    _, mixed = run_once(toy_library, tmp_path / "cache", tmp_path / "c", task=["toy_mc", "toy_gen"], gen_kwargs={"max_gen_toks": 7})
    assert mixed["inference"] == {"requests": 200, "computed": 40, "cached": 160}
