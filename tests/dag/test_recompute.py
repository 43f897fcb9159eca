"""What a run says of its cache (the line after the results table, and the manifest), and
``recompute``: answers computed anew, written over the cached ones, which later runs then read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalflow.errors import ConfigError
from evalflow.output.run_summary import summary_lines
from tests.support.models import CountingModel, DriftingModel
from tests.support.runs import Runner, stage_hits

DRIFTING = "tests.support.models:DriftingModel"
CHOICES = 4  # toy_mc's: one loglikelihood request per choice


def counts(manifest: dict) -> tuple[int, int, int]:
    inference = manifest["inference"]
    return inference["requests"], inference["cached"], inference["computed"]


def cache_line(folder: Path) -> str:
    return summary_lines(folder)[-1]


def test_the_line_counts_answers_read_and_computed_and_names_the_folder(runner: Runner) -> None:
    _, cold, folder = runner(limit=10)
    assert counts(cold) == (40, 0, 40) and CountingModel.calls_total == 40
    assert cache_line(folder) == f"cache: 0 of 40 model answers read from the cache {runner.cache}, 40 computed"
    _, raised, folder = runner(limit=20)  # a partial hit: the first 10 documents' answers are cached
    assert counts(raised) == (80, 40, 40) and CountingModel.calls_total == 40
    assert cache_line(folder) == (
        f"cache: 40 of 80 model answers read from the cache {runner.cache}, 40 computed "
        "(recompute=answers computes them anew)"
    )
    _, warm, folder = runner(limit=20)
    assert counts(warm) == (80, 80, 0) and CountingModel.calls_total == 0
    assert (warm["cache_dir"], warm["recompute"]) == (str(runner.cache), None)
    assert cache_line(folder).startswith("cache: 80 of 80 model answers read from the cache ")


def test_a_request_two_tasks_share_is_computed_once_and_counted_computed_for_both(
    runner: Runner, toy_library: Path
) -> None:
    (toy_library / "toy_mc_twin.yaml").write_text(
        (toy_library / "toy_mc.yaml").read_text().replace("task: toy_mc", "task: toy_mc_twin")
    )
    _, manifest, _ = runner(task=["toy_mc", "toy_mc_twin"], limit=3)
    assert counts(manifest) == (24, 0, 24) and CountingModel.calls_total == 12


def test_recompute_answers_calls_the_model_for_every_request_and_writes_over_the_cache(runner: Runner) -> None:
    runner(model=DRIFTING, limit=5)
    before = samples(runner.out / "run1")
    DriftingModel.DRIFT = 7
    try:
        _, fresh, folder = runner(model=DRIFTING, limit=5, recompute="answers")
        assert counts(fresh) == (20, 0, 20) and CountingModel.calls_total == 20
        hits = stage_hits(fresh)
        assert [name for name, hit in hits.items() if hit] == ["load_docs", "fewshot", "instances"]
        assert fresh["recompute"] == "answers"
        assert cache_line(folder) == (
            f"cache: 0 of 20 model answers read (recompute=answers: computed anew), "
            f"20 computed and written to the cache {runner.cache}"
        )
        recomputed = samples(folder)
        assert recomputed != before
        _, later, folder = runner(
            model=DRIFTING, limit=5
        )  # reads the recomputed answers, and the stages scored from them
    finally:
        DriftingModel.DRIFT = 0
    assert counts(later) == (20, 20, 0) and CountingModel.calls_total == 0 and all(stage_hits(later).values())
    assert samples(folder) == recomputed


def test_recompute_all_computes_every_stage(runner: Runner) -> None:
    runner(limit=5)
    _, fresh, _ = runner(limit=5, recompute="all")
    assert not any(stage_hits(fresh).values()) and counts(fresh) == (20, 0, 20) and CountingModel.calls_total == 20
    _, later, _ = runner(limit=5)
    assert all(stage_hits(later).values()) and CountingModel.calls_total == 0


def test_recompute_takes_answers_or_all_only() -> None:
    from evalflow.config.settings import settings_from_config

    with pytest.raises(ConfigError, match=r"recompute='yes' is not allowed; use recompute=answers"):
        settings_from_config({"task": "t", "recompute": "yes"})
    assert [
        settings_from_config({"task": "t", "recompute": v}).recompute for v in (None, "False", "answers", "all")
    ] == [None, None, "answers", "all"]


def samples(folder: Path) -> list[list]:
    return [json.loads(line)["resps"] for line in (folder / "samples_toy_mc.jsonl").read_text().splitlines()]


def test_a_python_run_without_a_folder_logs_the_line(toy_library: Path, tmp_path: Path, caplog) -> None:
    from evalflow import evaluate

    def run() -> str:
        caplog.clear()
        with caplog.at_level("INFO", logger="evalflow"):
            evaluate(
                "toy_mc",
                {"type": "tests.support.models:CountingModel"},
                include_path=str(toy_library),
                limit=2,
                cache_dir=str(tmp_path / "c"),
            )
        lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("cache: ")]
        assert len(lines) == 1, lines
        return lines[0]

    assert run() == f"cache: 0 of 8 model answers read from the cache {tmp_path / 'c'}, 8 computed"
    assert run().startswith("cache: 8 of 8 model answers read from the cache ")
