"""The same lm-eval command line given to lm-eval 0.4.13 (the peer venv of ``../shared/parity``) and
to ``python -m evalflow lm-eval``: the same files in the same folders, the same results.json keys at
every depth (evalflow adds only its own ``evalflow`` and ``evalflow_version``), the same scores and
fields, and per-document parity of the samples files (``../shared/parity/compare.py``).

Settings: ``--model hf`` on SmolLM2 (arc_easy and boolq, 10 documents; gsm8k 5-shot, 5 documents;
the group mmlu_local, 57 subjects, 1 document each), and ``--model local-completions`` against the
real llama.cpp server (arc_easy, 10 documents).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import served
from tests.support.parity_harness import COMPARE
from tests.support.parity_harness import missing as peer_missing
from tests.support.peer_runs import evalflow_lm_eval, peer_sh_args, run_argvs

pytestmark = [pytest.mark.slow, pytest.mark.skipif(peer_missing() is not None, reason=str(peer_missing()))]

HF_RUNS = {
    "arc_easy,boolq": ["--tasks", "arc_easy,boolq", "--limit", "10"],
    "gsm8k 5-shot": ["--tasks", "gsm8k", "--num_fewshot", "5", "--limit", "5"],
    "mmlu_local group": ["--tasks", "mmlu_local", "--limit", "1"],
}
# and what lies under them; clustered_stderr: boolq's cluster_key (docs/correlated-documents.md)
EVALFLOW_ONLY = {"/evalflow", "/evalflow_version", "/clustered_stderr"}
DATE = re.compile(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d+")


def layout(folder: Path) -> dict[str, Path]:
    """The files under an --output_path, with the run's date written as DATE."""
    return {DATE.sub("DATE", str(p.relative_to(folder))): p for p in sorted(folder.rglob("*")) if p.is_file()}


def key_paths(value: Any, prefix: str = "") -> set[str]:
    if not isinstance(value, dict):
        return set()
    paths = set()
    for key, inner in value.items():
        paths |= {f"{prefix}/{key}", *key_paths(inner, f"{prefix}/{key}")}
    return paths


def assert_same_run(peer_out: Path, ours_out: Path) -> None:
    theirs, ours = layout(peer_out), layout(ours_out)
    assert list(theirs) == list(ours)
    [results] = [name for name in theirs if name.rsplit("/", 1)[-1].startswith("results_")]
    a, b = json.loads(theirs[results].read_text()), json.loads(ours[results].read_text())
    ours_keys = {k for k in key_paths(b) if not any(k == e or k.startswith(e + "/") for e in EVALFLOW_ONLY)}
    assert key_paths(a) == ours_keys
    assert [k for k in b if f"/{k}" not in EVALFLOW_ONLY] == list(a)  # lm-eval's key order
    for key in (
        "results",
        "groups",
        "group_subtasks",
        "versions",
        "n-shot",
        "higher_is_better",
        "n-samples",
        "tokenizer_pad_token",
        "tokenizer_eos_token",
        "tokenizer_bos_token",
        "eot_token_id",
        "max_length",
        "lm_eval_version",
        "model_name",
        "model_name_sanitized",
        "model_source",
    ):
        assert a.get(key) == b.get(key), key
    # evalflow batches by itself and records the device it ran on (lm-eval: the --device flag's
    # default cuda:0 even on a CPU): docs/lm-eval-migration.md
    skip = {"batch_size", "use_cache", "batch_sizes", "device"}
    assert {k: v for k, v in a["config"].items() if k not in skip} == {
        k: v for k, v in b["config"].items() if k not in skip
    }
    for name, path in theirs.items():
        if name.endswith(".jsonl"):
            done = subprocess.run(
                [sys.executable, str(COMPARE), str(path), str(ours[name])], capture_output=True, text=True
            )
            assert done.returncode == 0, done.stdout[-2000:]


@pytest.mark.timeout(3600)
def test_hf_runs_match_lm_evals_files_keys_and_documents(tmp_path: Path) -> None:
    common = peer_sh_args(tmp_path)
    names = list(HF_RUNS)
    run_argvs([[*common, *HF_RUNS[n], "--output_path", str(tmp_path / "peer" / str(i))] for i, n in enumerate(names)])
    for i, name in enumerate(names):
        evalflow_lm_eval(
            [*common, *HF_RUNS[name], "--output_path", str(tmp_path / "ours" / str(i))], tmp_path / "cache", tmp_path
        )
        assert_same_run(tmp_path / "peer" / str(i), tmp_path / "ours" / str(i))


@pytest.mark.timeout(1800)
@pytest.mark.skipif(served.missing() is not None, reason=str(served.missing()))
def test_local_completions_matches_lm_eval_against_the_llama_server(tmp_path: Path) -> None:
    from tests.support.parity_api import tokenizer_folder

    common = peer_sh_args(tmp_path)  # for its wrappers of the shared data
    wrappers = common[common.index("--include_path") + 1]
    server = served.LlamaServer.start(fixed=True)
    try:
        model_args = (
            f"model={served.MODEL_NAME},base_url={server.url}/completions,tokenizer_backend=huggingface,"
            f"tokenizer={tokenizer_folder(tmp_path)},tokenized_requests=False"
        )
        argv = [
            "--model",
            "local-completions",
            "--model_args",
            model_args,
            "--include_path",
            wrappers,
            "--tasks",
            "arc_easy",
            "--limit",
            "10",
            "--log_samples",
        ]
        run_argvs([[*argv, "--output_path", str(tmp_path / "peer")]])
        evalflow_lm_eval([*argv, "--output_path", str(tmp_path / "ours")], tmp_path / "cache", tmp_path)
    finally:
        server.stop()
    assert_same_run(tmp_path / "peer", tmp_path / "ours")
