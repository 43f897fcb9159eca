"""The datasets' own solutions, scored by the built-in tasks' targets through the sandbox: every
HumanEval canonical solution passes (164/164) and MBPP's reference code scores 498/500 or 499/500, what
../shared/parity/code_eval.py (the stand-in for HF's code_eval that lm-eval runs with) reports: document
356's code is wrong, document 112's is right but takes about 2-4 s of CPU for its 9999 case, so under
code_eval's 3 s limit its verdict depends on the host's speed. The test asserts what does not: 356 fails,
112 fails under a 0.3 s limit and passes under a 60 s one.

The suite's default scope runs every 8th document plus MBPP's two failing ones (about 100 programs);
``EVALFLOW_FULL_PARITY=1`` (the parity suite's switch) runs all 664."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from evalflow.sandbox import sandbox, using
from evalflow.scoring.code_exec import DEFAULT_TIMEOUT, pass_at_k
from evalflow.taskspec.data.docsets import load_docset
from evalflow.taskspec.prompts.templates import doc_to_target
from tests.support.builtin_tasks import all_yaml_tasks
from tests.support.paths import SHARED_DATA, SHARED_MAP

FULL = os.environ.get("EVALFLOW_FULL_PARITY") == "1"
MBPP_WRONG = [356]  # this reference code fails its own tests, under code_eval too
MBPP_SLOW = 112  # right, but near code_eval's 3 s limit: the verdict depends on the host's speed

pytestmark = [
    pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="shared benchmark data (../shared/data) is absent"),
    pytest.mark.skipif(sandbox("bwrap").unavailable() is not None, reason="bubblewrap cannot run here"),
]


def _scope(n: int) -> list[int]:
    return list(range(n)) if FULL else sorted(set(range(0, n, 8)) | {i for i in MBPP_WRONG if i < n})


def _passed(
    task_name: str, solution: str, only: list[int] | None = None, timeout: float = DEFAULT_TIMEOUT
) -> tuple[list[int], list[int]]:
    """The documents tried and the indices of those whose solution passes the task's test program."""
    task = all_yaml_tasks()[task_name]
    every = load_docset(task, SHARED_MAP).docs
    tried = only if only is not None else _scope(len(every))
    docs = [every[i] for i in tried]

    def score(doc: dict) -> float:
        candidate = (doc["prompt"] + doc["canonical_solution"]) if solution == "canonical" else doc["code"]
        with using("bwrap"):
            return pass_at_k([doc_to_target(task, doc)], [[candidate]], k=[1], timeout=timeout)["pass@1"]

    with ThreadPoolExecutor(max_workers=4) as pool:
        scores = list(pool.map(score, docs))
    return tried, [i for i, s in zip(tried, scores) if s == 1.0]


def test_every_humaneval_canonical_solution_passes() -> None:
    tried, passed = _passed("humaneval", "canonical")
    assert len(tried) == (164 if FULL else 21) and passed == tried


def test_mbpp_reference_code_scores_as_code_eval_does() -> None:
    tried, passed = _passed("mbpp", "code")
    assert len(tried) == (500 if FULL else 64)  # 0, 8, ..., 496 (112 among them) and 356
    assert sorted(set(tried) - set(passed) - {MBPP_SLOW}) == MBPP_WRONG


def test_mbpp_slow_reference_code_fails_only_by_the_time_limit() -> None:
    assert _passed("mbpp", "code", only=[MBPP_SLOW], timeout=0.3)[1] == []
    assert _passed("mbpp", "code", only=[MBPP_SLOW], timeout=60.0)[1] == [MBPP_SLOW]
