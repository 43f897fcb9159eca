"""The code metrics (evalflow/scoring/code_exec.py): code_eval's estimator and reporting rules,
lm-eval's calling conventions, and their registration (names, keys of the stages that call them)."""

from __future__ import annotations

from math import comb

import pytest

from evalflow.errors import TaskError
from evalflow.sandbox import sandbox, using
from evalflow.scoring.code_exec import estimate_pass_at_k, pass_at_1, pass_at_k, program, runs_code
from evalflow.scoring.components import metric_components
from evalflow.scoring.registry import METRICS
from evalflow.taskspec.format.spec import TaskConfig

needs_bwrap = pytest.mark.skipif(sandbox("bwrap").unavailable() is not None, reason="bubblewrap cannot run here")
GOOD, BAD, TEST = "def f():\n    return 1", "def f():\n    return 2", "assert f() == 1"


@pytest.mark.parametrize("n", [1, 2, 5, 10, 64])
def test_estimator_is_one_minus_the_binomial_ratio(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert estimate_pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-12)


def test_program_is_candidate_newline_test() -> None:
    assert program("def f(): pass", "assert f() is None") == "def f(): pass\nassert f() is None"


@needs_bwrap
def test_pass_at_k_reports_only_the_k_it_has_samples_for() -> None:
    with using("bwrap"):
        assert pass_at_k([TEST], [[GOOD, BAD, BAD, BAD]], k=[1, 2, 8]) == {"pass@1": 0.25, "pass@2": 0.5}


def test_pass_at_k_needs_its_k() -> None:
    with pytest.raises(TaskError, match="k: \\[1\\]"):
        pass_at_k([TEST], [[GOOD]])


@needs_bwrap
def test_pass_at_1_takes_lm_eval_mbpp_forms() -> None:
    with using("bwrap"):
        assert pass_at_1([TEST], [GOOD]) == 1.0  # mbpp: the take_first string
        assert pass_at_1([TEST], [[BAD]]) == 0.0  # mbpp_instruct: the filter's list
        assert pass_at_1(TEST, [GOOD]) == 1.0


def test_registered_under_lm_eval_names_and_hashed_into_the_metrics_key() -> None:
    task = TaskConfig(
        task="t",
        output_type="generate_until",
        unsafe_code=True,
        metric_list=[{"metric": "pass_at_k", "k": [1]}, {"metric": "pass_at_1"}],
    )
    assert {"pass_at_k", "pass_at_1"} <= set(METRICS.names())
    assert set(metric_components(task)) == {"metric 'pass_at_k'", "metric 'pass_at_1'"}
    assert runs_code(task)
    assert not runs_code(TaskConfig(task="t", output_type="generate_until", metric_list=[{"metric": "pass_at_k"}]))
