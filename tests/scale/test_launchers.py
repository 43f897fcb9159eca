"""Sweeps through Hydra's launchers: a 2-job sweep with hydra/launcher=submitit_local and with
hydra/launcher=ray (joining the session's Ray cluster, which the preset's null
object_store_memory makes possible), as README "Scaling out" runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def sweep(tmp_path: Path, *launcher: str) -> list[dict]:
    out = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "evalflow", "-m", *launcher, "model=dummy", "task=arith_mc", "limit=5",
           "num_fewshot=0,1", f"cache_dir={tmp_path / 'cache'}", f"hydra.sweep.dir={out}", "bootstrap_iters=0"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=360,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = [json.loads((out / str(job) / "results.json").read_text()) for job in (0, 1)]
    assert [r["n-shot"]["arith_mc"] for r in results] == [0, 1]
    return results


def test_sweep_with_submitit_local(tmp_path: Path) -> None:
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install 'evalflow[slurm]'")
    results = sweep(tmp_path, "hydra/launcher=submitit_local")
    assert (tmp_path / "sweep" / ".submitit").is_dir()  # the jobs really went through submitit
    assert all("acc,none" in r["results"]["arith_mc"] for r in results)


def test_sweep_with_ray_joining_a_cluster(tmp_path: Path, ray_cluster: str) -> None:
    pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason="pip install 'evalflow[ray]'")
    results = sweep(tmp_path, "hydra/launcher=ray", f"hydra.launcher.ray.init.address={ray_cluster}")
    assert all("acc,none" in r["results"]["arith_mc"] for r in results)
