"""Progress and counters: the rate is right when everything fits in one chunk, and a fully cached
run's manifest counts the requests it reused."""

from __future__ import annotations

import io
import logging
import types
from pathlib import Path

import pytest

from evalflow.core.records import Request
from evalflow.models.dummy import DummyModel
from evalflow.scale.answer_cache import CachedModel, RequestProgress
from tests.support.scale_runs import run_once


def NO_HEARTBEAT(tick: object, period: float) -> types.SimpleNamespace:
    """No heartbeat thread: only the test reads its clock."""
    return types.SimpleNamespace(stop=lambda: None)


def test_one_chunk_reports_its_real_rate(caplog: pytest.LogCaptureFixture) -> None:
    progress = RequestProgress(
        stream=io.StringIO(), clock=lambda: 500.0, timer=NO_HEARTBEAT
    )  # no time passes but the chunk's own
    with caplog.at_level(logging.INFO, logger="evalflow.scale.answer_cache"):
        progress(64, 64, 2.0)  # all 64 requests in one chunk that took 2 s
    assert [r.getMessage() for r in caplog.records] == ["inference: 64/64 requests, 32 requests/s"]


def test_the_edge_reports_chunk_durations_so_no_run_says_zero(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    class Slowish(DummyModel):
        def loglikelihood(self, requests):  # type: ignore[no-untyped-def]
            import time

            time.sleep(0.05)
            return super().loglikelihood(requests)

    from evalflow.cache.store import CacheStore

    store = CacheStore(tmp_path)
    edge = CachedModel(
        store, "slowish", lambda: Slowish(), chunk_size=64, on_chunk=RequestProgress(stream=io.StringIO())
    )
    with caplog.at_level(logging.INFO, logger="evalflow.scale.answer_cache"):
        edge.loglikelihood([Request("loglikelihood", (f"q{i}", " a")) for i in range(10)])
    store.close()
    start, line = [r.getMessage() for r in caplog.records if r.getMessage().startswith("inference:")]
    assert start == "inference: 0/10 requests, started"
    assert line.startswith("inference: 10/10 requests, ") and " 0.0 requests/s" not in line
    assert float(line.split(", ")[1].split()[0]) > 0


def test_a_fully_cached_run_counts_its_cached_requests(toy_library: Path, tmp_path: Path) -> None:
    _, first = run_once(toy_library, tmp_path / "cache", tmp_path / "a", task=["toy_mc", "toy_gen"])
    _, again = run_once(toy_library, tmp_path / "cache", tmp_path / "b", task=["toy_mc", "toy_gen"])
    assert first["inference"] == {"requests": 200, "computed": 200, "cached": 0}
    assert again["inference"] == {"requests": 200, "computed": 0, "cached": 200}
    assert again["workers"] == {} and sum(w["requests"] for w in first["workers"].values()) == 200
    # one task served whole from the stage cache, the other's requests from the request cache
    _, mixed = run_once(
        toy_library, tmp_path / "cache", tmp_path / "c", task=["toy_mc", "toy_gen"], gen_kwargs={"max_gen_toks": 7}
    )
    assert mixed["inference"] == {"requests": 200, "computed": 40, "cached": 160}


def test_the_rate_and_eta_carry_across_the_run_s_lists_of_misses(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 20, item 6: one progress for the whole run; the second task's first report already has
    the run's rate and an ETA, and the counts add up."""
    now = [100.0]
    progress = RequestProgress(stream=io.StringIO(), clock=lambda: now[0], log_every=0.0, timer=NO_HEARTBEAT)
    with caplog.at_level(logging.INFO, logger="evalflow.scale.answer_cache"):
        progress(64, 128, 2.0)  # task 1: the first chunk took 2 s
        now[0] += 2.0
        progress(128, 128, 2.0)
        progress(64, 256, 2.0)  # task 2's first chunk: a new list, same run
    assert [r.getMessage() for r in caplog.records] == [
        "inference: 64/128 requests, 32 requests/s, ETA 2 s",
        "inference: 128/128 requests, 32 requests/s",
        "inference: 64/256 requests (192/384 in the run), 48 requests/s, ETA 4 s",
    ]


def test_the_terminal_bar_shows_the_rate_from_the_first_chunk() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    progress = RequestProgress(stream=stream, clock=lambda: 10.0)
    progress(64, 640, 4.0)  # one chunk of 64 that took 4 s
    progress.bar.refresh()
    assert "16 req/s, ETA 36 s" in stream.getvalue()
    progress.close()
