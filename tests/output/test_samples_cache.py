"""A fully cached run copies its samples files from the cache and decodes only what its writers use."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalflow.cache.store import CacheStore
from evalflow.dag.pipeline import OUTPUTS, STAGE_NAMES
from evalflow.dag.runner import StageOutputs, plan
from evalflow.taskspec.format.spec import TaskConfig
from tests.support.runs import Runner, stage_hits

SAMPLE_STAGES = ("load_docs", "instances", "inference", "filters", "metrics")
SUMMARY_STAGES = ("load_docs", "fewshot", "inference")


def output_key(name: str, stage_keys: dict[str, str | None], think_end_token: str | None = None) -> str | None:
    """The key of output node ``name`` planned after stages with ``stage_keys``."""
    settings = {"think_end_token": think_end_token}
    (planned,) = plan(TaskConfig(task="t"), settings, tuple(n for n in OUTPUTS if n.name == name), stage_keys)
    return planned.key


def _samples_entries(cache: Path) -> list[str]:
    store = CacheStore(cache)
    try:
        return [k for (k,) in store.raw._sql("SELECT key FROM Cache WHERE tag = 'samples'").fetchall()]
    finally:
        store.close()


def test_a_cached_run_writes_the_same_samples_from_the_cache(runner: Runner) -> None:
    _, _, first = runner(limit=6)
    (key,) = _samples_entries(runner.cache)
    _, manifest, second = runner(limit=6)
    assert all(stage_hits(manifest).values())
    assert (second / "samples_toy_mc.jsonl").read_bytes() == (first / "samples_toy_mc.jsonl").read_bytes()
    assert _samples_entries(runner.cache) == [key]
    store = CacheStore(runner.cache)
    store.raw.delete(key)  # lost: rebuilt from the stages, byte for byte
    store.close()
    _, _, third = runner(limit=6)
    assert (third / "samples_toy_mc.jsonl").read_bytes() == (first / "samples_toy_mc.jsonl").read_bytes()
    _, _, fourth = runner(limit=7)  # more documents: other stage keys, another samples entry
    assert len((fourth / "samples_toy_mc.jsonl").read_text().splitlines()) == 7
    assert len(_samples_entries(runner.cache)) == 2


def test_the_samples_key_is_its_stages_keys_and_nothing_else() -> None:
    keys: dict[str, str | None] = {name: f"{name}:k" for name in STAGE_NAMES}
    base = output_key("samples", keys)
    assert base is not None and base.startswith("samples:")
    for name in STAGE_NAMES:
        changed = output_key("samples", {**keys, name: f"{name}:other"})
        assert (changed != base) == (name in SAMPLE_STAGES), name
    assert output_key("samples", {**keys, "inference": None}) is None  # a volatile model: never cached
    # the run's thinking marker decides which generations show thinking_unclosed
    assert output_key("samples", keys, think_end_token="</think>") != base


def test_cached_stages_are_decoded_on_first_use_only(toy_library: Path, tmp_path: Path) -> None:
    from evalflow.config.compose import compose_settings
    from evalflow.dag.runner import execute
    from evalflow.run.phases import task_settings
    from evalflow.taskspec.catalog.index import TaskIndex

    settings = compose_settings(
        task="toy_mc",
        preset="dummy",
        overrides=[],
        values={"include_path": [str(toy_library)], "cache_dir": str(tmp_path / "c"), "limit": 4},
    )
    task = TaskIndex.build(settings.include_path).resolve(["toy_mc"]).tasks[0]
    prompt_stages = ("load_docs", "fewshot", "instances")
    from evalflow.dag.pipeline import PIPELINE

    pipeline = tuple(n for n in PIPELINE if n.name in prompt_stages)
    store = CacheStore(settings.cache_dir)
    try:
        first, _ = execute(task, task_settings(task, settings, "m"), store, {}, pipeline)
        assert isinstance(first, StageOutputs) and first.waiting == ()
        again, events = execute(task, task_settings(task, settings, "m"), store, {}, pipeline)
        assert all(e.hit for e in events) and again.waiting == prompt_stages
        assert list(again["fewshot"]) == list(first["fewshot"])
        assert again.waiting == ("load_docs", "instances")
        with pytest.raises(KeyError):
            again["metrics"]
    finally:
        store.close()


def test_a_cached_run_decodes_no_documents_prompts_or_answers(
    toy_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their sizes, few-shot split and data fingerprint come from the task's memoized summary."""
    import json

    from evalflow import evaluate

    settings = {"include_path": [str(toy_library)], "cache_dir": str(tmp_path / "c"), "limit": 6, "num_fewshot": 2}
    first = evaluate("toy_mc", "dummy", output_dir=tmp_path / "r1", **settings)
    decoded: list[str] = []
    original = StageOutputs.__getitem__

    def spy(self: StageOutputs, name: str) -> object:
        if name in self.waiting:
            decoded.append(name)
        return original(self, name)

    monkeypatch.setattr(StageOutputs, "__getitem__", spy)
    second = evaluate("toy_mc", "dummy", output_dir=tmp_path / "r2", **settings)
    assert decoded and not {"load_docs", "fewshot", "instances", "inference"} & set(decoded), decoded
    for key in ("results", "n-samples", "configs"):
        assert second[key] == first[key], key
    manifests = [json.loads((tmp_path / r / "manifest.json").read_text()) for r in ("r1", "r2")]
    for key in ("data", "fewshot_split"):
        assert manifests[1][key] == manifests[0][key], key
    assert manifests[1]["inference"]["cached"] == manifests[0]["inference"]["requests"] == 6 * 4


def test_the_summary_key_is_its_stages_keys_and_nothing_else() -> None:
    keys: dict[str, str | None] = {name: f"{name}:k" for name in STAGE_NAMES}
    base = output_key("summary", keys)
    assert base is not None and base.startswith("summary:")
    for name in STAGE_NAMES:
        assert (output_key("summary", {**keys, name: f"{name}:other"}) != base) == (name in SUMMARY_STAGES), name
    assert output_key("summary", {**keys, "inference": None}) is None


def test_output_nodes_are_built_when_read_and_listed_in_no_manifest_line(toy_library: Path, tmp_path: Path) -> None:
    """A run without log_samples builds (and caches) no samples text, only each task's summary."""
    import json

    from evalflow import evaluate

    settings = {"include_path": [str(toy_library)], "cache_dir": str(tmp_path / "c"), "limit": 4}
    evaluate("toy_mc", "dummy", output_dir=tmp_path / "r1", log_samples=False, **settings)
    store = CacheStore(tmp_path / "c")
    try:
        tags = [t for (t,) in store.raw._sql("SELECT tag FROM Cache WHERE tag IN ('samples', 'summary')").fetchall()]
    finally:
        store.close()
    assert tags == ["summary"]
    stages = [s["stage"] for s in json.loads((tmp_path / "r1" / "manifest.json").read_text())["stages"]]
    assert stages == ["load_docs", "fewshot", "instances", "inference", "filters", "metrics", "aggregate"]
