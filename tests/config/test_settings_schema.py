"""One declaration per run setting: evalflow/config/schema.py's RunConfig. RunSettings, its
defaults and the stages' view of the settings are derived from it."""

from __future__ import annotations

import dataclasses

import pytest

from evalflow.config.schema import RunConfig, defaults, inert_settings, stage_settings
from evalflow.config.settings import RunSettings, settings_from_config
from evalflow.errors import ConfigError
from evalflow.run.phases import task_settings
from evalflow.taskspec.format.spec import TaskConfig
from tests.support.runs import Runner, stage_hits

TASK = TaskConfig(task="t", dataset_path="json", test_split="test", output_type="generate_until", doc_to_text="{{q}}")


def test_every_declared_setting_reaches_run_settings() -> None:
    declared = {f.name for f in dataclasses.fields(RunConfig)} - {"task"}
    assert declared <= {f.name for f in dataclasses.fields(RunSettings)} and "tasks" in {
        f.name for f in dataclasses.fields(RunSettings)
    }
    assert all(
        f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING  # type: ignore[misc]
        for f in dataclasses.fields(RunSettings)
    ), "RunSettings repeats no default"


def test_unset_settings_take_the_schemas_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    s = settings_from_config({"task": "t"})
    for name in ("seed", "max_batch_size", "bootstrap_iters", "chunk_size", "workers", "predict_only", "explain"):
        assert getattr(s, name) == defaults()[name], name
    monkeypatch.setattr("evalflow.config.settings.defaults", lambda: {**defaults(), "bootstrap_iters": 7})
    assert settings_from_config({"task": "t"}).bootstrap_iters == 7


def test_the_stages_see_every_stage_setting_under_its_name() -> None:
    s = settings_from_config({"task": "t", "limit": 3, "system_instruction": "Be brief.", "data_map": {}})
    seen = task_settings(TASK, s, "model-a")
    assert set(stage_settings()) <= set(seen)
    assert (seen["limit"], seen["system_instruction"], seen["model"]) == (3, "Be brief.", "model-a")


def test_an_unknown_setting_in_a_mapping_is_refused_with_did_you_mean() -> None:
    with pytest.raises(ConfigError, match="did you mean 'num_fewshot'"):
        settings_from_config({"task": "t", "num_fewshots": 3})


def test_inert_settings_are_in_no_cache_key(runner: Runner) -> None:
    """The settings the schema marks inert (the report does not name runs by them) change no key:
    changed together, every stage is served from the cache. (cache_dir is where the keys live;
    workers, worker_resources and ray_address need Ray: tests/scale checks their run folders.)"""
    assert {"batch_size", "workers", "explain", "cache_dir"} <= set(inert_settings())
    assert not set(inert_settings()) & set(stage_settings())
    _, first, _ = runner(limit=5)
    _, again, _ = runner(limit=5, batch_size=3, max_batch_size=4, chunk_size=2, explain=True, log_samples=False)
    assert all(stage_hits(again).values())
    assert [s["key"] for s in again["stages"]] == [s["key"] for s in first["stages"]]
