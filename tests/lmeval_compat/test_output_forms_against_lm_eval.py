"""The same argv given to lm-eval 0.4.13 (the peer venv of ``../shared/parity``) and to
``python -m evalflow lm-eval``: stdout is lm-eval's (header line and table), the samples files hold
the same value types key by key, results.json's ``config`` holds the same values and types, and
``--seed 0,None,8,52`` (lm-eval's own help example) draws the same few-shot contexts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.parity_harness import PEER_VENV, ROOT, SHARED
from tests.support.parity_harness import missing as peer_missing
from tests.support.peer_runs import peer_sh_args

pytestmark = [pytest.mark.slow, pytest.mark.skipif(peer_missing() is not None, reason=str(peer_missing()))]

ARGV = ["--tasks", "arc_easy,boolq,gsm8k", "--limit", "2", "--num_fewshot", "3", "--seed", "0,None,8,52"]
ARGV += ["--gen_kwargs", "max_gen_toks=16", "--batch_size", "1"]


def _run(python: list[str], argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*python, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_types(v) for v in value]
    return type(value).__name__


def _files(folder: Path) -> dict[str, Path]:
    return {p.name.rsplit("_", 1)[0]: p for p in folder.rglob("*.json*")}


@pytest.mark.timeout(3600)
def test_stdout_samples_types_config_and_seeded_fewshot_match_lm_eval(tmp_path: Path) -> None:
    common = peer_sh_args(tmp_path)
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
        "NLTK_DATA": str(SHARED / "data" / "nltk_data"),
    }
    peer = _run([str(PEER_VENV / "bin" / "lm_eval")], [*common, *ARGV, "-o", str(tmp_path / "peer")], tmp_path, env)
    ours_env = {**env, "PYTHONPATH": str(ROOT), "EVALFLOW_CACHE": str(tmp_path / "cache")}
    ours = _run(
        [sys.executable, "-m", "evalflow", "lm-eval"],
        [*common, *ARGV, "-o", str(tmp_path / "ours")],
        tmp_path,
        ours_env,
    )
    assert ours.stdout == peer.stdout  # the header line and make_table's text
    theirs_files, ours_files = _files(tmp_path / "peer"), _files(tmp_path / "ours")
    assert sorted(theirs_files) == sorted(ours_files)
    for name, path in theirs_files.items():
        if name.startswith("samples_"):
            a = [json.loads(line) for line in path.read_text().splitlines()]
            b = [json.loads(line) for line in ours_files[name].read_text().splitlines()]
            b = [{k: v for k, v in r.items() if k != "cluster"} for r in b]  # evalflow's cluster_key (boolq)
            assert [_types(r) for r in b] == [_types(r) for r in a], name
            assert [r["arguments"] for r in b] == [r["arguments"] for r in a], name  # the seeded few-shot contexts
        else:
            a, b = json.loads(path.read_text()), json.loads(ours_files[name].read_text())
            skip = {"device"}  # the device the model ran on (docs/lm-eval-migration.md)
            assert {k: v for k, v in b["config"].items() if k not in skip} == {
                k: v for k, v in a["config"].items() if k not in skip
            }
            assert b["fewshot_as_multiturn"] == a["fewshot_as_multiturn"]
            assert {t: c.get("generation_kwargs") for t, c in b["configs"].items()} == {
                t: c.get("generation_kwargs") for t, c in a["configs"].items()
            }
