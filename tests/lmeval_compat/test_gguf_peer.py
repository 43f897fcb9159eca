"""``--model gguf`` (lm-eval's client of a llama.cpp server) given to lm-eval 0.4.13 and to
``python -m evalflow lm-eval`` against the same real llama.cpp server (``../shared/serve``, with its
echo fixed): the same per-document log-likelihoods and answers (``compare.py``) and the same score."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import served
from tests.support.parity_harness import COMPARE
from tests.support.parity_harness import missing as peer_missing
from tests.support.peer_runs import evalflow_lm_eval, peer_sh_args, run_argvs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(peer_missing() is not None, reason=str(peer_missing())),
    pytest.mark.skipif(served.missing() is not None, reason=str(served.missing())),
]


@pytest.mark.timeout(1800)
def test_gguf_matches_lm_eval_against_the_llama_server(tmp_path: Path) -> None:
    common = peer_sh_args(tmp_path)  # for its wrappers of the shared data
    wrappers = common[common.index("--include_path") + 1]
    server = served.LlamaServer.start(fixed=True)
    try:
        argv = ["--model", "gguf", "--model_args", f"base_url={server.url.removesuffix('/v1')}"]
        argv += ["--include_path", wrappers, "--tasks", "arc_easy", "--limit", "10", "--log_samples"]
        run_argvs([[*argv, "--output_path", str(tmp_path / "peer")]])
        evalflow_lm_eval([*argv, "--output_path", str(tmp_path / "ours")], tmp_path / "cache", tmp_path)
    finally:
        server.stop()
    [theirs] = (tmp_path / "peer").rglob("samples_arc_easy_*.jsonl")
    [ours] = (tmp_path / "ours").rglob("samples_arc_easy_*.jsonl")
    done = subprocess.run([sys.executable, str(COMPARE), str(theirs), str(ours)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:]
    scores = [
        json.loads(next(folder.rglob("results_*.json")).read_text())["results"]["arc_easy"]["acc,none"]
        for folder in (tmp_path / "peer", tmp_path / "ours")
    ]
    assert scores[0] == scores[1]
