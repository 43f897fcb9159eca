"""Parity with lm-eval's own TaskManager on lm-eval's whole shipped task library (~14k YAMLs).

Skips when the peer venv (lm-eval 0.4.13) is absent. lm-eval's reference lists take ~10 s to make,
so they are computed once per test session into a temp file.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from evalflow.taskspec.catalog.index import TaskIndex

PEER = Path.home() / ".cache" / "evalflow-peer" / "venv"
PEER_PYTHON = PEER / "bin" / "python"
LIBRARY = PEER / "lib" / "python3.11" / "site-packages" / "lm_eval" / "tasks"

REFERENCE_SCRIPT = """
import json, sys
from lm_eval.tasks import TaskManager
tm = TaskManager()
json.dump({"tasks": tm.all_subtasks, "groups": tm.all_groups, "tags": tm.all_tags}, open(sys.argv[1], "w"))
"""

pytestmark = pytest.mark.skipif(
    not (PEER_PYTHON.exists() and LIBRARY.is_dir()), reason="lm-eval's peer venv is not installed"
)


@pytest.fixture(scope="session")
def lm_eval_names(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """lm-eval's TaskManager lists for its shipped folder (its default: include_defaults=True)."""
    out = tmp_path_factory.mktemp("lm_eval_reference") / "names.json"
    done = subprocess.run(
        [str(PEER_PYTHON), "-c", REFERENCE_SCRIPT, str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "LMEVAL_LOG_LEVEL": "ERROR"},
    )
    if done.returncode != 0:
        pytest.fail(f"lm-eval's TaskManager failed:\n{done.stderr[-2000:]}")
    return json.loads(out.read_text())


def test_index_lists_what_lm_eval_lists(
    lm_eval_names: dict[str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / "cache"))
    cold = TaskIndex.build([LIBRARY], builtin=False)
    warm = TaskIndex.build([LIBRARY], builtin=False)
    for index in (cold, warm):
        ours = {"tasks": index.task_names(), "groups": index.group_names(), "tags": index.tag_names()}
        for kind, reference in lm_eval_names.items():
            assert len(reference) > 100, f"lm-eval listed too few {kind}; is its library intact?"
            found = set(reference) & set(ours[kind])  # the same name, as the same kind
            missing = sorted(set(reference) - found)
            assert len(found) >= 0.99 * len(reference), f"{kind}: {len(missing)} missing, e.g. {missing[:10]}"


def test_library_groups_resolve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sample of real groups and tags expands into tasks with lm-eval's overrides."""
    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / "cache"))
    index = TaskIndex.build([LIBRARY], builtin=False)
    mmlu = index.resolve("mmlu", trust_task_code=True)
    assert len(mmlu.tasks) == 57
    assert [g.name for g in mmlu.groups][:1] == ["mmlu"] and len(mmlu.groups) == 5
    openllm = index.resolve("openllm", trust_task_code=True)
    fewshot = {t.task: t.num_fewshot for t in openllm.tasks}
    assert fewshot["arc_challenge"] == 25 and fewshot["truthfulqa_mc2"] == 0 and fewshot["gsm8k"] == 5
    arc = index.resolve("ai2_arc")
    assert [t.task for t in arc.tasks] == ["arc_challenge", "arc_easy"]
