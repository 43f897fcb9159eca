"""The datasets' own solutions, scored by the built-in tasks' targets through the sandbox: every
HumanEval canonical solution passes (164/164) and MBPP's reference code scores 498/500, what
../shared/parity/code_eval.py (the stand-in for HF's code_eval that lm-eval runs with) reports."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from evalflow.sandbox import sandbox, using
from evalflow.scoring.code_exec import pass_at_k
from evalflow.taskspec.data import load_docset
from evalflow.taskspec.templates import doc_to_target
from tests.taskspec.test_builtin_tasks import SHARED_DATA, SHARED_MAP, all_yaml_tasks

pytestmark = [
    pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="shared benchmark data (../shared/data) is absent"),
    pytest.mark.skipif(sandbox("bwrap").unavailable() is not None, reason="bubblewrap cannot run here"),
]


def _passed(task_name: str, solution: str) -> list[int]:
    """Indices of the documents whose solution passes the task's test program."""
    task = all_yaml_tasks()[task_name]
    docs = load_docset(task, SHARED_MAP).docs

    def score(doc: dict) -> float:
        candidate = (doc["prompt"] + doc["canonical_solution"]) if solution == "canonical" else doc["code"]
        with using("bwrap"):
            return pass_at_k([doc_to_target(task, doc)], [[candidate]], k=[1])["pass@1"]

    with ThreadPoolExecutor(max_workers=4) as pool:
        scores = list(pool.map(score, docs))
    return [i for i, s in enumerate(scores) if s == 1.0]


def test_every_humaneval_canonical_solution_passes() -> None:
    assert len(_passed("humaneval", "canonical")) == 164


def test_mbpp_reference_code_scores_as_code_eval_does() -> None:
    passed = _passed("mbpp", "code")
    assert len(passed) == 498
    assert sorted(set(range(500)) - set(passed)) == [112, 356]
