"""The core issue's acceptance table: what a change re-runs, and what reaches the model."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.models import CountingModel
from tests.support.runs import Runner, stage_hits
from tests.support.toy_tasks import with_acc_norm

ALL_STAGES = ["load_docs", "fewshot", "instances", "inference", "filters", "metrics", "aggregate"]


def test_identical_rerun_hits_every_stage_and_calls_nothing(runner: Runner) -> None:
    first, m1, _ = runner()
    assert CountingModel.calls_total == m1["inference"]["computed"] > 0
    second, m2, folder = runner()
    assert stage_hits(m2) == dict.fromkeys(ALL_STAGES, True)
    assert CountingModel.calls_total == 0
    # the inference stage itself hit, so no request reached the edge: they all count as cached
    assert m2["inference"] == {
        "requests": m1["inference"]["requests"],
        "computed": 0,
        "cached": m1["inference"]["requests"],
    }
    assert m1["inference"]["requests"] == 160 and m2["workers"] == {}
    assert 0 < m1["answering_seconds"] <= m1["seconds"] and m2["answering_seconds"] == 0
    assert [w["requests"] for w in m1["workers"].values()] == [m1["inference"]["computed"]]
    assert second["results"] == first["results"]
    assert json.loads((folder / "results.json").read_text())["results"] == json.loads(json.dumps(first["results"]))


def test_metric_change_rescores_without_inference(runner: Runner, toy_library: Path) -> None:
    runner()
    yaml_file = toy_library / "toy_mc.yaml"
    yaml_file.write_text(with_acc_norm(yaml_file.read_text()))
    _results, manifest, folder = runner()
    hits = stage_hits(manifest)
    assert all(hits[s] for s in ["load_docs", "fewshot", "instances", "inference", "filters"])
    assert not hits["metrics"] and not hits["aggregate"]
    assert CountingModel.calls_total == 0
    assert "acc_norm,none" in json.loads((folder / "results.json").read_text())["results"]["toy_mc"]


def test_filter_change_refilters_without_inference(runner: Runner, toy_library: Path) -> None:
    _first, _, _ = runner("toy_gen")
    yaml_file = toy_library / "toy_gen.yaml"
    yaml_file.write_text(yaml_file.read_text().replace('regex_pattern: "#### ', 'regex_pattern: "####\\\\s*'))
    _, manifest, _ = runner("toy_gen")
    hits = stage_hits(manifest)
    assert hits["inference"] and hits["instances"]
    assert not hits["filters"] and not hits["metrics"] and not hits["aggregate"]
    assert CountingModel.calls_total == 0


def test_num_fewshot_change_sends_only_new_prompts(runner: Runner) -> None:
    runner(num_fewshot=0)
    seen_before = {(r.type, tuple(map(str, r.args))) for r in CountingModel.requests_seen}
    _, manifest, _ = runner(num_fewshot=2)
    hits = stage_hits(manifest)
    assert hits["load_docs"]
    assert not any(hits[s] for s in ["fewshot", "instances", "inference", "filters", "metrics", "aggregate"])
    sent = [(r.type, tuple(map(str, r.args))) for r in CountingModel.requests_seen]
    assert sent and not set(sent) & seen_before
    assert len(sent) == len(set(sent)) == manifest["inference"]["computed"]
    # going back to 0 shots: every request is answered from the cache
    _, manifest, _ = runner(num_fewshot=0)
    assert CountingModel.calls_total == 0 and stage_hits(manifest)["inference"]


def test_larger_limit_sends_only_the_new_documents(runner: Runner) -> None:
    runner(limit=10)
    _, manifest, _ = runner(limit=20)
    contexts = {r.args[0] for r in CountingModel.requests_seen}
    assert CountingModel.calls_total == 10 * 4  # ten new documents, four choices each
    assert len(contexts) == 10
    assert manifest["inference"] == {"requests": 80, "computed": 40, "cached": 40}


def test_wrong_number_of_responses_is_a_clear_error(runner: Runner) -> None:
    import pytest

    from evalflow.errors import ModelError

    with pytest.raises(ModelError, match="exactly one response per request"):
        runner(model="tests.support.models:WrongCountModel")
    assert not list(runner.out.glob("*/results.json"))


def test_sampled_repeats_are_separate_cached_answers(runner: Runner, toy_library: Path) -> None:
    yaml_file = toy_library / "toy_gen.yaml"
    yaml_file.write_text(
        yaml_file.read_text().replace("  do_sample: false", "  do_sample: true\n  temperature: 0.7") + "repeats: 3\n"
    )
    _, manifest, folder = runner("toy_gen", limit=4)
    assert CountingModel.calls_total == 4 * 3  # k samples are k requests, each with its repeat index
    assert {r.repeat for r in CountingModel.requests_seen} == {0, 1, 2}
    assert len({r.seed for r in CountingModel.requests_seen}) == 1
    sample = json.loads((folder / "samples_toy_gen.jsonl").read_text().splitlines()[0])
    assert len(sample["resps"]) == 1 and len(sample["resps"][0]) == 3  # lm-eval: one instance, 3 answers
    runner("toy_gen", limit=4)
    assert CountingModel.calls_total == 0
    _, manifest, _ = runner("toy_gen", limit=4, seed=7)  # another seed: new samples
    assert manifest["inference"]["computed"] == 12
