"""The scale-out settings: validated up front, and in no cache key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evalflow.cache.store import CacheStore
from evalflow.config.compose import compose_settings
from evalflow.dag.runner import plan
from evalflow.errors import ConfigError
from evalflow.run.parts import model_edge
from evalflow.run.phases import task_settings
from evalflow.taskspec.catalog.index import TaskIndex

ROOT = Path(__file__).resolve().parents[2]


def _settings(tmp_path: Path, **values: object):
    return compose_settings(
        task="arith_mc", preset="dummy", overrides=[], values={"cache_dir": str(tmp_path), **values}
    )


def test_no_scale_out_setting_enters_a_cache_key(tmp_path: Path) -> None:
    task = TaskIndex.build(()).resolve(["arith_mc"]).tasks[0]
    keys = []
    for values in ({}, {"workers": 3, "worker_resources": {"num_gpus": 1, "num_cpus": 4}, "ray_address": "auto"}):
        settings = _settings(tmp_path, **values)
        store = CacheStore(tmp_path)
        edge = model_edge(settings, store)
        store.close()
        stage_keys = [p.key for p in plan(task, task_settings(task, settings, edge.identity))]
        keys.append((edge.identity, stage_keys))  # the identity is what every request key is made of
    assert keys[0] == keys[1]


def test_settings_are_checked_before_anything_starts(tmp_path: Path) -> None:
    assert _settings(tmp_path).workers == 1
    s = _settings(tmp_path, workers=8, worker_resources={"num_gpus": 1})
    assert (s.workers, dict(s.worker_resources), s.ray_address) == (8, {"num_gpus": 1}, None)
    with pytest.raises(ConfigError, match="workers=0"):
        _settings(tmp_path, workers=0)
    with pytest.raises(ConfigError, match="worker_resources"):
        _settings(tmp_path, worker_resources={"num_gpus": "one"})


def test_worker_resources_become_ray_actor_options() -> None:
    from evalflow.scale.ray_workers import actor_options

    assert actor_options({}) == {"num_cpus": 1}
    assert actor_options({"num_gpus": 1, "num_cpus": 4, "accelerator_A100": 1}) == {
        "num_cpus": 4,
        "num_gpus": 1,
        "resources": {"accelerator_A100": 1},
    }


def test_one_worker_and_a_fully_cached_run_never_import_ray(tmp_path: Path) -> None:
    """workers=1 runs in-process; a cached run with workers=4 has no miss, so no Ray either."""
    code = (
        "import sys, evalflow\n"
        "kw = dict(task='arith_mc', model='dummy', limit=5, cache_dir=sys.argv[1], bootstrap_iters=0)\n"
        "evalflow.evaluate(workers=1, **kw)\n"
        "assert 'ray' not in sys.modules, 'workers=1 imported ray'\n"
        "r = evalflow.evaluate(workers=4, ray_address='127.0.0.1:9', **kw)\n"
        "assert 'ray' not in sys.modules, 'a fully cached workers=4 run imported ray'\n"
        "print('no ray')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("no ray")


def test_readme_overrides_compose() -> None:
    """`workers=8 worker_resources='{num_gpus: 1}' ray_address=auto` as typed on the command line."""
    from evalflow.config.compose import compose_config
    from evalflow.config.settings import settings_from_config

    cfg = compose_config(["model=dummy", "workers=8", "worker_resources={num_gpus: 1}", "ray_address=auto"])
    s = settings_from_config(cfg)
    assert (s.workers, dict(s.worker_resources), s.ray_address) == (8, {"num_gpus": 1}, "auto")
