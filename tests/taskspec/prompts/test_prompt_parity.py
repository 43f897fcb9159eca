"""Prompt parity with lm-eval 0.4.13: every request string of the first 100 documents, byte for byte.

The reference is lm-eval itself, run once per test session through ``shared/parity/peer.sh``
with its dummy model (prompts only, fast) and ``--log_samples``; each samples line holds the
request arguments of one document. evalflow then builds the same documents' requests twice:
from its own built-in YAMLs (``tasks/``, data via ``conf/data_maps/shared.yaml``) and from
lm-eval's own YAMLs (the wrappers ``make_wrappers.py`` writes, read by evalflow's loader).

Covered: gsm8k and gsm8k_cot (generation, 5-shot, random and fixed-sample few-shot), winogrande,
boolq and piqa (5-shot drawn from the evaluated split, so the document itself is excluded),
arc_easy / arc_challenge / lambada_openai (0-shot), and MMLU subjects 0- and 5-shot (first_n).
Set ``EVALFLOW_PARITY_ALL=1`` to check all 57 MMLU subjects instead of five (slower).
Skips when lm-eval's venv (``~/.cache/evalflow-peer/venv``) or the shared data is absent.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from evalflow.taskspec.data.docsets import load_docset
from evalflow.taskspec.format.loader import load_yaml, task_from_dict
from evalflow.taskspec.format.spec import TaskConfig
from evalflow.taskspec.prompts.fewshot_context import build_contexts, effective_num_fewshot
from evalflow.taskspec.prompts.requests import build_instances

ROOT = Path(__file__).resolve().parents[3]
SHARED = (ROOT / ".." / "shared").resolve()
PEER_SH = SHARED / "parity" / "peer.sh"
MAKE_WRAPPERS = SHARED / "parity" / "make_wrappers.py"
PEER_VENV = Path(os.environ.get("PEER_VENV", Path.home() / ".cache/evalflow-peer/venv"))
PEER_PY = PEER_VENV / "bin" / "python"
DATA_MAP = ROOT / "conf" / "data_maps" / "shared.yaml"
LIMIT = 100
FEWSHOT_SEED = 1234  # lm-eval's default fewshot_random_seed

ALL_SUBJECTS = sorted(p.stem[len("mmlu_") :] for p in (ROOT / "tasks" / "mmlu").glob("mmlu_*.yaml"))
SOME_SUBJECTS = [
    "abstract_algebra",
    "college_medicine",
    "high_school_european_history",
    "moral_scenarios",
    "world_religions",
]
SUBJECTS = ALL_SUBJECTS if os.environ.get("EVALFLOW_PARITY_ALL") == "1" else SOME_SUBJECTS
MMLU = [f"mmlu_{s}" for s in SUBJECTS]
RUNS = {  # num_fewshot -> tasks run by lm-eval with it
    0: ["arc_easy", "arc_challenge", "lambada_openai", *MMLU],
    5: ["gsm8k", "gsm8k_cot", "winogrande", "boolq", "piqa", *MMLU],
}
CASES = [(task, shots, source) for shots, tasks in RUNS.items() for task in tasks for source in ("builtin", "lmeval")]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not PEER_PY.exists() or not PEER_SH.exists(), reason="lm-eval's venv or peer.sh is absent"),
    pytest.mark.skipif(not (SHARED / "data").is_dir(), reason="shared benchmark data (../shared/data) is absent"),
]

Requests = list[list[Any]]


def _peer_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "EVALFLOW_"))}
    return {**env, "PEER_VENV": str(PEER_VENV)}


def _run_peer(shots: int, out: Path) -> dict[str, dict[int, Requests]]:
    """lm-eval's requests per task and document, from one peer.sh run."""
    cmd = [
        "bash",
        str(PEER_SH),
        ",".join(RUNS[shots]),
        "--model",
        "dummy",
        "--model_args",
        "",
        "--limit",
        str(LIMIT),
        "--num_fewshot",
        str(shots),
        "--log_samples",
    ]
    proc = subprocess.run(
        cmd, cwd=out, env={**_peer_env(), "PEER_OUT": str(out)}, capture_output=True, text=True, timeout=1500
    )
    if proc.returncode != 0:
        pytest.fail(f"peer.sh failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    found: dict[str, dict[int, Requests]] = {}
    for path in out.rglob("samples_*.jsonl"):
        task = path.name[len("samples_") :].rsplit("_", 1)[0]
        docs = found.setdefault(task, {})
        for line in path.read_text(encoding="utf-8").split("\n"):  # not splitlines: rows hold U+2028
            if not line.strip():
                continue
            row = json.loads(line)  # one line per (document, filter): the requests are the same
            docs.setdefault(row["doc_id"], [[a["arg_0"], a["arg_1"]] for a in row["arguments"].values()])
    return found


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], dict[int, Requests]]:
    """lm-eval's requests for every case, computed once per session (two peer runs)."""
    ref = {}
    for shots in RUNS:
        out = tmp_path_factory.mktemp(f"peer{shots}")
        for task, docs in _run_peer(shots, out).items():
            ref[(task, shots)] = docs
    return ref


@pytest.fixture(scope="session")
def wrappers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """lm-eval's own task YAMLs, each wrapped to read the shared data (as peer.sh does)."""
    out = tmp_path_factory.mktemp("wrappers")
    tasks_dir = subprocess.run(
        [str(PEER_PY), "-c", "import lm_eval, os; print(os.path.join(os.path.dirname(lm_eval.__file__), 'tasks'))"],
        capture_output=True,
        text=True,
        check=True,
        env=_peer_env(),
    ).stdout.strip()
    subprocess.run(
        [str(PEER_PY), str(MAKE_WRAPPERS), tasks_dir, str(SHARED / "data"), str(out)],
        check=True,
        capture_output=True,
        env=_peer_env(),
    )
    return out


@functools.cache
def builtin_paths() -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / "tasks").rglob("*.yaml")):
        raw = load_yaml(path)
        if "group" not in raw:
            out[raw["task"]] = path
    return out


def our_requests(task: TaskConfig, data_map: Any, shots: int, doc_ids: list[int]) -> tuple[int, dict[int, Requests]]:
    """The number of evaluated documents, and evalflow's requests for ``doc_ids``."""
    docs = load_docset(task, data_map)
    contexts = build_contexts(task, docs, effective_num_fewshot(task, shots), FEWSHOT_SEED, doc_ids)
    return len(docs.docs), {
        c.doc_id: [list(i.request.args) for i in build_instances(task, c.doc_id, docs.docs[c.doc_id], c)]
        for c in contexts
    }


@pytest.mark.parametrize(("name", "shots", "source"), CASES)
def test_requests_equal_lm_evals(name: str, shots: int, source: str, reference: dict, wrappers: Path) -> None:
    expected = reference.get((name, shots))
    assert expected, f"lm-eval wrote no samples for {name} ({shots}-shot)"
    if source == "builtin":
        path, data_map = builtin_paths()[name], DATA_MAP
    else:
        path, data_map = wrappers / f"{name}.yaml", None
    task = task_from_dict(load_yaml(path), str(path))
    n_docs, ours = our_requests(task, data_map, shots, sorted(expected))
    assert sorted(expected) == list(range(min(LIMIT, n_docs)))  # the first 100 documents, all present
    for doc_id, theirs in expected.items():
        mine = ours[doc_id]
        assert len(mine) == len(theirs), f"doc {doc_id}: {len(mine)} requests, lm-eval made {len(theirs)}"
        for k, (a, b) in enumerate(zip(mine, theirs)):
            assert a == b, f"{name} {shots}-shot ({source}) doc {doc_id} request {k}:\n{a!r}\n!=\n{b!r}"
