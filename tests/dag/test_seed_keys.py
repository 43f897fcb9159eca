"""lm-eval's four seeds as evalflow's four settings: each changes the keys of exactly the stages it
reaches (and what is downstream of them), computed from the plan without running anything."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from evalflow.config.settings import settings_from_config
from evalflow.dag.runner import plan
from evalflow.run.phases import task_settings
from evalflow.taskspec.format.spec import TaskConfig
from tests.support.plan_keys import BASE_TASK
from tests.support.plan_keys import STAGES as S

CODE_TASK = dataclasses.replace(BASE_TASK, process_docs="utils.process_docs")  # documents pass through code


@pytest.fixture(autouse=True)
def fixed_data_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    import evalflow.dag.pipeline as pipeline

    monkeypatch.setattr(pipeline, "data_identity", lambda task, data_map: f"data-of-{task.dataset_name}")


def keys(task: TaskConfig, **overrides: Any) -> dict[str, str]:
    settings = settings_from_config({"task": "t", "bootstrap_iters": 1000, "data_map": {}, **overrides})
    return {p.node.name: p.key for p in plan(task, task_settings(task, settings, "model-a"))}


def changed(task: TaskConfig, **overrides: Any) -> list[str]:
    before, after = keys(task), keys(task, **overrides)
    return [s for s in S if before[s] != after[s]]


CASES = [
    # lm-eval's fewshot_random_seed; sampled generation too while torch_seed is unset
    ("seed", BASE_TASK, {"seed": 7}, S[1:]),
    ("seed with torch_seed set: the few-shot sampler only", BASE_TASK, {"seed": 7, "torch_seed": 1234}, S[1:]),
    ("torch_seed: sampled generation", BASE_TASK, {"torch_seed": 8}, S[2:]),
    ("torch_seed equal to seed's default: nothing", BASE_TASK, {"torch_seed": 1234}, []),
    ("random_seed: task code while scoring", BASE_TASK, {"random_seed": 5}, S[5:]),
    ("numpy_seed: task code while scoring", BASE_TASK, {"numpy_seed": 5}, S[5:]),
    ("random_seed with process_docs code: the documents too", CODE_TASK, {"random_seed": 5}, S),
    ("numpy_seed with process_docs code", CODE_TASK, {"numpy_seed": 5}, S),
]


@pytest.mark.parametrize("name,task,overrides,expected", CASES, ids=[c[0] for c in CASES])
def test_each_seed_rekeys_exactly_the_stages_it_reaches(
    name: str, task: TaskConfig, overrides: dict[str, Any], expected: list[str]
) -> None:
    assert changed(task, **overrides) == expected


def test_torch_seed_zero_is_a_seed() -> None:
    assert settings_from_config({"task": "t", "torch_seed": 0}).torch_seed == 0
