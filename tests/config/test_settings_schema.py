"""One declaration per run setting: evalflow/config/schema.py's RunSettings. Hydra's schema, the
parsed settings, their defaults and the stages' view of the settings are derived from it."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from evalflow.config.compose import compose_config
from evalflow.config.schema import PARSERS, SETTINGS, RunSettings, defaults, inert_settings, stage_settings
from evalflow.config.settings import settings_from_config
from evalflow.errors import ConfigError
from evalflow.run.phases import task_settings
from evalflow.taskspec.format.spec import TaskConfig
from tests.support.runs import Runner, stage_hits

CONFIG = Path(__file__).resolve().parents[2] / "evalflow" / "config"
TASK = TaskConfig(task="t", dataset_path="json", test_split="test", output_type="generate_until", doc_to_text="{{q}}")


def test_config_declares_each_setting_once() -> None:
    """No class field or mapping key in evalflow/config/ names a setting but RunSettings' fields
    (``task`` is declared as the field ``tasks``)."""
    names = {s.name for s in SETTINGS} | {"tasks"}
    found: list[str] = []
    for path in sorted(CONFIG.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                fields = [
                    s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                ]
                found += [f"{path.name}:{node.name}.{f}" for f in fields if f in names]
    assert sorted(found) == sorted(
        f"schema.py:RunSettings.{f.name}" for f in dataclasses.fields(RunSettings) if f.name in names
    )


def test_each_field_is_parsed_from_a_declared_setting() -> None:
    assert [name for name, _, _ in PARSERS] == [f.name for f in dataclasses.fields(RunSettings)]
    declared = {s.name for s in SETTINGS}
    assert {key for _, key, _ in PARSERS} == declared and "task" in declared and "tasks" not in declared
    assert all(s.help.endswith(".") and s.help[0].isupper() for s in SETTINGS), "each setting says what it means"
    assert all(
        f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING  # type: ignore[misc]
        for f in dataclasses.fields(RunSettings)
    ), "a RunSettings is only ever built parsed, from every setting"


def test_hydra_composes_on_the_declared_types_and_defaults() -> None:
    cfg = compose_config(["model=dummy"])
    assert set(cfg.keys()) - {"hydra"} == {s.name for s in SETTINGS}
    assert (cfg.seed, cfg.bootstrap_iters, cfg.include_path, cfg.worker_resources) == (1234, 100000, [], None)
    assert cfg.batch_size == "auto"  # conf/config.yaml's value over the declared default (1)
    with pytest.raises(ConfigError, match="num_fewshot"):
        compose_config(["model=dummy", "num_fewshot=five"])


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


def test_docs_running_lists_every_setting() -> None:
    """docs/running.md's settings table names every declared setting (its words say more than
    ``help`` does: examples, links), so a new setting cannot ship undocumented."""
    page = (CONFIG.parents[1] / "docs" / "running.md").read_text(encoding="utf-8")
    rows = [line.split("|")[1] for line in page.splitlines() if line.startswith("| `")]
    listed = {name.strip(" `") for row in rows for name in row.split(",")}
    assert [s.name for s in SETTINGS if s.name not in listed] == []
