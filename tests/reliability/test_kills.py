"""SIGKILL a run at 20 moments (loading, prompts, inference, scoring, writing) and re-run each time.

Every re-run must finish with the uninterrupted run's results and samples, compute exactly the
requests the killed run had not persisted (never one it had), and the killed run's folder must
never hold a results.json. Kill moments are events the run itself reports (a stage beginning, the
model receiving a chunk, a file about to be written: see :mod:`tests.support.zygote`) plus a
random offset from a seeded RNG, never wall-clock guesses.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from evalflow.cache.store import CacheStore
from tests.support.reliability import (
    Zygote,
    calls,
    pid_alive,
    request_keys,
    results_of,
    samples_of,
    toy_args,
    wait_for,
)

PAUSE = 0.06  # seconds each instrumented stage / file write waits after announcing itself
CHUNK = 16
DELAY = 0.004  # seconds per request in the CountingModel: a 16-request chunk takes ~64 ms


@dataclass(frozen=True)
class Moment:
    phase: str
    event: str  # a line of the events file, or "call N": the model received its N-th chunk
    offset: float  # seconds after the event


def schedule(rng: random.Random, chunks: int) -> list[Moment]:
    """20 kill moments over every phase of a run of toy_mc then toy_gen, in a seeded random order."""
    stage = lambda name, task="toy_mc": f"begin {name} {task}"  # noqa: E731
    # toy_gen reads the same data as toy_mc: its load_docs is a cache hit, never a moment to kill
    moments = [Moment("load", stage("load_docs"), rng.uniform(0, PAUSE * 1.5)) for _ in range(3)]
    moments += [
        Moment("prompts", stage("fewshot"), rng.uniform(0, PAUSE * 1.5)),
        Moment("prompts", stage("instances", "toy_gen"), rng.uniform(0, PAUSE * 1.5)),
    ]
    moments += [
        Moment("inference", f"call {rng.randint(1, chunks - 1)}", rng.uniform(0, CHUNK * DELAY * 1.2)) for _ in range(7)
    ]
    moments += [
        Moment("scoring", stage("filters", "toy_gen"), rng.uniform(0, PAUSE * 1.5)),
        Moment("scoring", stage("metrics"), rng.uniform(0, PAUSE * 1.5)),
        Moment("scoring", stage("metrics", "toy_gen"), rng.uniform(0, PAUSE * 1.5)),
        Moment("scoring", stage("aggregate", "toy_gen"), rng.uniform(0, PAUSE * 1.5)),
        Moment("writing", "write samples_toy_mc.jsonl", rng.uniform(0, PAUSE)),
        Moment("writing", "write samples_toy_gen.jsonl", rng.uniform(0, PAUSE)),
        Moment("writing", "write manifest.json", rng.uniform(0, PAUSE)),
        Moment("writing", "write results.json", rng.uniform(0, PAUSE)),
    ]
    first, rest = moments[0], moments[1:]  # a load kill first, while the datasets cache is still cold
    rng.shuffle(rest)
    return [first, *rest]


def happened(moment: Moment, events: Path, call_log: Path) -> bool:
    if moment.event.startswith("call "):
        return call_log.exists() and len(call_log.read_text().split()) >= int(moment.event.split()[1])
    return events.exists() and moment.event in events.read_text().splitlines()


@dataclass(frozen=True)
class Expected:
    results: dict
    samples: dict
    total: int  # requests of the run


def play(zygote: Zygote, library: Path, round_dir: Path, moment: Moment, expected: Expected) -> str | None:
    """Start a run, SIGKILL it at ``moment``, check what it left, re-run it and check the re-run.
    Returns the phase the kill landed in, or None when the run finished first."""
    cache, killed_dir = round_dir / "cache", round_dir / "killed"
    events, log = round_dir / "events", round_dir / "calls"
    round_dir.mkdir()
    env = {
        "EVALFLOW_TEST_EVENTS": str(events),
        "EVALFLOW_TEST_PAUSE": str(PAUSE),
        "EVALFLOW_TEST_CALL_LOG": str(log),
        "EVALFLOW_TEST_DELAY": str(DELAY),
    }
    child = zygote.start(toy_args(library, cache, killed_dir, f"chunk_size={CHUNK}"), round_dir / "killed.out", env)
    if wait_for(lambda: happened(moment, events, log), lambda: pid_alive(child.pid)):
        time.sleep(moment.offset)
        os.kill(child.pid, signal.SIGKILL)
    status = zygote.wait()
    context = f"{round_dir.name} ({moment}): {(round_dir / 'killed.out').read_text()[-2000:]}"
    assert status in (0, -signal.SIGKILL), context
    if status == 0:  # the run outpaced the kill: it must then be complete
        assert results_of(killed_dir)["results"] == expected.results, context
        return None
    assert not (killed_dir / "results.json").exists(), context

    persisted = request_keys(cache)
    store = CacheStore(cache)
    try:  # no torn entry anywhere
        assert [k for k in store.raw.iterkeys() if store.check(k)] == [], context
    finally:
        store.close()
    rerun_dir, rerun_log = round_dir / "rerun", round_dir / "rerun-calls"
    status = zygote.run(
        toy_args(library, cache, rerun_dir, f"chunk_size={CHUNK}"),
        round_dir / "rerun.out",
        {"EVALFLOW_TEST_CALL_LOG": str(rerun_log)},
    )
    context += (round_dir / "rerun.out").read_text()[-2000:]
    assert status == 0, context
    assert results_of(rerun_dir)["results"] == expected.results, context
    assert samples_of(rerun_dir) == expected.samples, context
    inference = json.loads((rerun_dir / "manifest.json").read_text())["inference"]
    assert inference["computed"] == calls(rerun_log) == expected.total - len(persisted), context
    assert inference["cached"] <= len(persisted), context  # 0 when the inference stages were hits
    assert request_keys(cache) >= persisted and len(request_keys(cache)) == expected.total, context
    return moment.phase


@pytest.fixture
def zygotes(tmp_path: Path):
    """Two zygotes sharing one (initially empty) datasets cache: rounds run two at a time."""
    pair = [Zygote({"HF_DATASETS_CACHE": str(tmp_path / "hf-datasets")}) for _ in range(2)]
    yield pair
    for z in pair:
        z.close()


def test_twenty_kills_each_rerun_is_complete_and_recomputes_nothing_persisted(
    toy_library: Path, tmp_path: Path, zygotes: list[Zygote]
) -> None:
    ref_dir = tmp_path / "reference"
    assert zygotes[0].run(toy_args(toy_library, tmp_path / "ref-cache", ref_dir), tmp_path / "ref.out") == 0, (
        tmp_path / "ref.out"
    ).read_text()
    total = len(request_keys(tmp_path / "ref-cache"))
    assert total == 200  # toy_mc: 40 docs x 4 choices; toy_gen: 40 generations
    expected = Expected(results_of(ref_dir)["results"], samples_of(ref_dir), total)

    moments = list(enumerate(schedule(random.Random(20240605), total // CHUNK)))

    def play_half(half: int) -> list[str | None]:
        return [
            play(zygotes[half], toy_library, tmp_path / f"round{i:02d}", moment, expected)
            for i, moment in moments[half::2]
        ]

    with ThreadPoolExecutor(max_workers=2) as pool:
        landed = [phase for phases in pool.map(play_half, (0, 1)) for phase in phases if phase]
    assert len(landed) >= 16, landed  # nearly every kill must land before the run ends
    assert set(landed) >= {"load", "inference", "scoring", "writing"}, landed
