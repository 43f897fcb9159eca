"""Joining or starting Ray: an address where nothing listens, ``ray_address=auto``, and more
workers than the cluster can place all end in a clear message, never a silent wait.

The runs are subprocesses (``python -m evalflow``): the test process itself is connected to the
session's cluster, and Ray would reuse that connection."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from evalflow.errors import ConfigError

pytest.importorskip("ray", reason="Ray is not installed: pip install 'evalflow[ray]'")

from evalflow.scale.ray_workers import RayDispatch, check_reachable, shortfall

ROOT = Path(__file__).resolve().parents[2]


def evalflow(tmp_path: Path, *overrides: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """A small dummy-model run with ``workers=2``; Ray's own address variable is cleared and its
    temp folder empty unless ``env`` says otherwise, so no cluster of this machine is found by chance."""
    base = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    short = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay under 108 bytes
    base.update({"PYTHONPATH": str(ROOT), "RAY_TMPDIR": short})
    cmd = [
        sys.executable,
        "-m",
        "evalflow",
        "model=dummy",
        "task=arith_mc",
        "limit=8",
        "chunk_size=8",
        "workers=2",
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / 'run'}",
        "bootstrap_iters=0",
        *overrides,
    ]
    try:
        return subprocess.run(cmd, cwd=ROOT, env={**base, **(env or {})}, capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(short, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_address_where_nothing_listens_is_refused_with_what_to_do(tmp_path: Path) -> None:
    port = free_port()
    done = evalflow(tmp_path, f"ray_address=127.0.0.1:{port}")
    assert done.returncode != 0
    assert f"ray_address=127.0.0.1:{port}: no Ray cluster answers there" in done.stderr
    assert "ray start --head" in done.stderr and not (tmp_path / "run" / "results.json").exists()


def test_a_malformed_address_is_refused() -> None:
    with pytest.raises(ConfigError, match="is not HOST:PORT"):
        check_reachable("headnode")


def test_auto_without_a_cluster_on_this_machine_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Ray raises for ``auto`` when it finds no cluster (it also scans the machine's processes
    for one, so while the session's cluster runs this cannot be shown with the real Ray): evalflow
    adds what to do."""
    from evalflow.scale import ray_workers

    class NoCluster:
        @staticmethod
        def is_initialized() -> bool:
            return False

        @staticmethod
        def init(**_: object) -> None:
            raise ConnectionError("Could not find any running Ray instance. Please specify the one to connect to.")

    monkeypatch.setattr(ray_workers, "import_ray", lambda: NoCluster)
    dispatch = RayDispatch({"type": "dummy"}, workers=2, address="auto")
    with pytest.raises(
        ConfigError, match="ray_address=auto: Could not find any running Ray instance.*ray start --head"
    ):
        dispatch._start()


def test_auto_joins_the_cluster_ray_would_find(ray_cluster: str, tmp_path: Path) -> None:
    """``ray_address=auto`` is handed to Ray, which finds the cluster (here through RAY_ADDRESS,
    as on a node where `ray start` ran)."""
    done = evalflow(tmp_path, "ray_address=auto", "worker_resources={num_cpus: 1}", env={"RAY_ADDRESS": ray_cluster})
    assert done.returncode == 0, done.stderr[-2000:]
    workers = json.loads((tmp_path / "run" / "manifest.json").read_text())["workers"]
    assert sorted(name.split("@")[0] for name in workers) == ["w0", "w1"]
    assert sum(w["requests"] for w in workers.values()) == 32


def test_more_workers_than_a_local_ray_can_place_are_refused(tmp_path: Path) -> None:
    done = evalflow(tmp_path, "worker_resources={num_cpus: 1000}")
    assert done.returncode != 0
    assert "workers=2 with worker_resources={'num_cpus': 1000} need 2000 CPU" in done.stderr
    assert "cannot grow" in done.stderr and not (tmp_path / "run" / "results.json").exists()


def test_a_joined_cluster_too_small_is_a_warning(ray_cluster: str, caplog: pytest.LogCaptureFixture) -> None:
    """A cluster may have an autoscaler, so joining one that is too small for now only warns."""
    import ray

    dispatch = RayDispatch(
        {"type": "dummy"}, workers=2, resources={"num_cpus": 1000, "tpu_slice": 1}, address=ray_cluster
    )
    with caplog.at_level(logging.WARNING, logger="evalflow.scale.ray_workers"):
        dispatch._check_capacity(ray)
    assert "need 2000 CPU (the cluster has 4), 2 tpu_slice (the cluster has 0)" in caplog.text
    assert "wait until the cluster grows" in caplog.text


def test_shortfall_counts_every_kind_of_resource() -> None:
    options = {"num_cpus": 2, "num_gpus": 1, "memory": 2**30, "resources": {"accel": 1}}
    cluster = {"CPU": 8.0, "GPU": 1.0, "memory": 4.0 * 2**30}
    assert shortfall(options, 2, cluster) == {"GPU": (2, 1.0), "accel": (2, 0.0)}
    assert shortfall(options, 1, {**cluster, "accel": 1.0}) == {}


def test_docstring_example() -> None:
    import doctest

    from evalflow.scale import ray_workers

    result = doctest.testmod(ray_workers)
    assert result.attempted > 0 and result.failed == 0
