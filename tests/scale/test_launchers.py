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


def sweep(tmp_path: Path, *launcher: str, cache_dir: str = "") -> list[dict]:
    out = tmp_path / "sweep"
    cmd = [
        sys.executable,
        "-m",
        "evalflow",
        "-m",
        *launcher,
        "model=dummy",
        "task=arith_mc",
        "limit=5",
        "num_fewshot=0,1",
        f"cache_dir={cache_dir or tmp_path / 'cache'}",
        f"hydra.sweep.dir={out}",
        "bootstrap_iters=0",
    ]
    done = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=360, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = [json.loads((out / str(job) / "results.json").read_text()) for job in (0, 1)]
    assert [r["n-shot"]["arith_mc"] for r in results] == [0, 1]
    return results


def test_sweep_with_submitit_local(tmp_path: Path) -> None:
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install 'evalflow[slurm]'")
    results = sweep(tmp_path, "hydra/launcher=submitit_local")
    assert (tmp_path / "sweep" / ".submitit").is_dir()  # the jobs really went through submitit
    assert all("acc,none" in r["results"]["arith_mc"] for r in results)


def test_slurm_sweep_jobs_leave_cache_shards_that_merge_into_one_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """README's Slurm recipe, with submitit's local executor standing in for Slurm: each job has its
    own "node-local" cache, copied to the sweep's cache-shards/ at its end; merged, they serve both
    jobs' configurations without a single model call."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install 'evalflow[slurm]'")
    sweep(
        tmp_path,
        "hydra/launcher=submitit_local",
        "hydra/callbacks=cache_shard",
        cache_dir=str(tmp_path / "node-${hydra:job.num}"),
    )
    shards = sorted((tmp_path / "sweep" / "cache-shards").iterdir())
    assert [p.name for p in shards] == ["0", "1"]
    from evalflow.commands.cache import main
    from tests.support.scale_runs import run_once

    assert main(["merge", *map(str, shards), f"cache_dir={tmp_path / 'merged'}"]) == 0
    assert "0 damaged" in capsys.readouterr().out
    (no_tasks := tmp_path / "no-extra-tasks").mkdir()
    for shots in (0, 1):
        _, manifest = run_once(
            no_tasks, tmp_path / "merged", tmp_path / f"again{shots}", task="arith_mc", limit=5, num_fewshot=shots
        )
        assert manifest["inference"]["computed"] == 0 and all(e["hit"] for e in manifest["stages"])


def test_slurm_preset_sets_the_documented_keys() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evalflow",
            "--cfg",
            "hydra",
            "hydra/launcher=slurm",
            "hydra.launcher.partition=gpu",
            "hydra.launcher.gpus_per_node=4",
            "hydra.launcher.timeout_min=600",
            "hydra.launcher.array_parallelism=8",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    launcher = done.stdout.split("  launcher:\n", 1)[1]
    for line in (
        "_target_: hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher",
        "partition: gpu",
        "gpus_per_node: 4",
        "timeout_min: 600",
        "array_parallelism: 8",
    ):
        assert line in launcher


def test_sweep_with_ray_joining_a_cluster(tmp_path: Path, ray_cluster: str) -> None:
    pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason="pip install 'evalflow[ray]'")
    results = sweep(tmp_path, "hydra/launcher=ray", f"hydra.launcher.ray.init.address={ray_cluster}")
    assert all("acc,none" in r["results"]["arith_mc"] for r in results)
