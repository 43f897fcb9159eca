"""SIGKILL a run after its model's N-th batch, inside one chunk, and re-run it (issue 38 item 2).

A chunk (here all 80 requests of the run, as a 512-request chunk holds a small run whole) is what
is sorted and batched together, not what is persisted together: a model with ``answer_parts``
hands each batch back as it finishes and the edge saves it, so the kill loses at most the batch
running and one answered batch not yet saved. The re-run must compute exactly what the cache
lacks, and finish with the uninterrupted run's results and samples. The kill is aimed at an event
the run reports (the model's call log gets a line as each batch starts), never at a wall-clock guess.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from evalflow.scale.dispatch import SAVE_EVERY
from tests.support.models import BatchingModel
from tests.support.reliability import Zygote, calls, pid_alive, request_keys, results_of, samples_of, wait_for

BATCHING = "tests.support.models:BatchingModel"
BATCH = BatchingModel.BATCH
# seconds per request: a batch takes longer than SAVE_EVERY, so each answered batch is saved on its
# own (a faster model's batches are saved together, SAVE_EVERY seconds' worth at a time)
DELAY = 1.5 * SAVE_EVERY / BATCH


def args(library: Path, cache: Path, run_dir: Path) -> list[str]:
    return [
        "model=dummy",
        f"model.type={BATCHING}",
        "task=toy_mc",
        f"include_path=[{library}]",
        "limit=20",
        f"cache_dir={cache}",
        "bootstrap_iters=0",
        f"hydra.run.dir={run_dir}",
    ]


def batches(log: Path) -> int:
    """Batches the model started (a line each in its call log)."""
    return len(log.read_text().split()) if log.exists() else 0


@pytest.fixture
def zygote(tmp_path: Path):
    z = Zygote({"HF_DATASETS_CACHE": str(tmp_path / "hf-datasets")})
    yield z
    z.close()


@pytest.mark.parametrize("kill_after", [5, 12])
def test_a_kill_inside_a_chunk_loses_only_the_batches_in_flight(
    toy_library: Path, tmp_path: Path, zygote: Zygote, kill_after: int
) -> None:
    ref_dir = tmp_path / "reference"
    assert zygote.run(args(toy_library, tmp_path / "ref-cache", ref_dir), tmp_path / "ref.out") == 0, (
        tmp_path / "ref.out"
    ).read_text()
    total = len(request_keys(tmp_path / "ref-cache"))
    assert total == 80  # 20 docs x 4 choices: one chunk, 20 batches

    cache, log = tmp_path / "cache", tmp_path / "calls"
    child = zygote.start(
        args(toy_library, cache, tmp_path / "killed"),
        tmp_path / "killed.out",
        {"EVALFLOW_TEST_CALL_LOG": str(log), "EVALFLOW_TEST_DELAY": str(DELAY)},
    )
    assert wait_for(lambda: batches(log) >= kill_after, lambda: pid_alive(child.pid)), (
        tmp_path / "killed.out"
    ).read_text()
    os.kill(child.pid, signal.SIGKILL)
    assert zygote.wait() == -signal.SIGKILL
    started = batches(log)  # read after the kill: every batch the killed run began
    persisted = request_keys(cache)
    # lost: the batch running, and at most one answered batch whose save the kill cut short
    assert BATCH * (started - 2) <= len(persisted) <= BATCH * started < total, (started, len(persisted))

    rerun_dir, rerun_log = tmp_path / "rerun", tmp_path / "rerun-calls"
    assert (
        zygote.run(
            args(toy_library, cache, rerun_dir), tmp_path / "rerun.out", {"EVALFLOW_TEST_CALL_LOG": str(rerun_log)}
        )
        == 0
    ), (tmp_path / "rerun.out").read_text()
    inference = json.loads((rerun_dir / "manifest.json").read_text())["inference"]
    assert inference["computed"] == calls(rerun_log) == total - len(persisted)
    assert inference["cached"] == len(persisted)
    assert results_of(rerun_dir)["results"] == results_of(ref_dir)["results"]
    assert samples_of(rerun_dir) == samples_of(ref_dir)
    assert request_keys(cache) == request_keys(tmp_path / "ref-cache")
