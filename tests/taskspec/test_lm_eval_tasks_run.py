"""End to end: lm-eval's ifeval from the installed library (``include_path=lm_eval``), offline with
the shared data map and NLTK data, no ``trust_task_code``; then reproduced from its snapshot, which
names the library (not a folder) and, with the same lm-eval, hits the cache for every stage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT, SHARED_DATA

DATA_MAP = SHARED_DATA / "lm_eval_tasks_map.yaml"
NLTK_DATA = SHARED_DATA / "nltk_data"

pytestmark = pytest.mark.skipif(
    not (DATA_MAP.is_file() and NLTK_DATA.is_dir()), reason=f"no shared data at {SHARED_DATA}"
)


def _evalflow(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "NLTK_DATA": str(NLTK_DATA),
        "EVALFLOW_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "evalflow", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )


def test_ifeval_from_lm_evals_library_runs_and_reproduces(tmp_path: Path) -> None:
    pytest.importorskip("lm_eval")
    from importlib import metadata

    run = tmp_path / "run"
    done = _evalflow(
        [
            "model=dummy",
            "task=ifeval",
            "include_path=lm_eval",
            f"data_map={DATA_MAP}",
            "limit=3",
            "bootstrap_iters=0",
            f"hydra.run.dir={run}",
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((run / "results.json").read_text())
    assert set(results["results"]["ifeval"]) >= {"prompt_level_strict_acc,none", "inst_level_loose_acc,none"}
    assert results["n-samples"]["ifeval"]["effective"] == 3
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["packages"]["lm-eval"] == metadata.version("lm-eval")
    assert "include_path: lm_eval\n" in (run / ".hydra" / "config.yaml").read_text()

    again = tmp_path / "again"
    done = _evalflow(
        ["--config-dir", str(run / ".hydra"), "--config-name", "config", f"hydra.run.dir={again}"], tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    replay = json.loads((again / "manifest.json").read_text())
    assert replay["inference"]["computed"] == 0
    assert all(stage["hit"] for stage in replay["stages"])
    assert json.loads((again / "results.json").read_text())["results"] == results["results"]
