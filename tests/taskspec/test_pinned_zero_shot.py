"""A task whose YAML pins ``num_fewshot: 0`` keeps it under a run's ``num_fewshot=K`` (lm-eval 0.4.13:
"num_fewshot has been set to 0 for ... Manual configuration will be ignored"), in the prompts, the
stage cache key, results.json and the log."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.support.models import CountingModel
from tests.support.runs import Runner, stage_hits

PINNED = """\
include: toy_gen.yaml
task: toy_pinned
num_fewshot: 0
"""


def test_run_num_fewshot_does_not_override_a_task_pinned_to_zero(
    runner: Runner, toy_library: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (toy_library / "toy_pinned.yaml").write_text(PINNED)
    with caplog.at_level(logging.WARNING):
        results, _, _ = runner(task=["toy_pinned", "toy_gen"], num_fewshot=2, limit=3)
    prompts = [r.args[0] for r in CountingModel.requests_seen]
    assert len(prompts) == 6
    # toy_pinned's prompts have no examples; toy_gen's have its 2 (plus the question). Both tasks'
    # requests reach the model as one pool, in the edge's order (longest first), not task by task
    assert sorted(p.count("Question:") for p in prompts) == [1, 1, 1, 3, 3, 3]
    assert results["n-shot"] == {"toy_pinned": 0, "toy_gen": 2}
    assert results["configs"]["toy_pinned"]["num_fewshot"] == 0
    assert results["configs"]["toy_gen"]["num_fewshot"] == 2
    warned = [r.getMessage() for r in caplog.records if "num_fewshot has been set to 0" in r.getMessage()]
    assert len(warned) == 1 and "'toy_pinned'" in warned[0] and "toy_gen" not in warned[0]
    assert "Manual configuration will be ignored" in warned[0] and "num_fewshot=2" in warned[0]


def test_pinned_task_cache_key_follows_the_shots_it_runs_with(runner: Runner, toy_library: Path) -> None:
    """num_fewshot=2 and no num_fewshot both run toy_pinned zero-shot: the same fewshot stage."""
    (toy_library / "toy_pinned.yaml").write_text(PINNED)
    runner(task="toy_pinned", num_fewshot=2, limit=3)
    _, manifest, _ = runner(task="toy_pinned", limit=3)
    assert stage_hits(manifest)["fewshot"] is True
    assert CountingModel.calls_total == 0  # every answer came from the first run's cache
