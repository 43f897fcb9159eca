"""`explain`: each kind of change is named by the right field, on exactly the stages that re-ran,
from the run folders alone (the cache is removed before explaining)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.runs import Runner
from tests.support.toy_tasks import with_acc_norm

TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}" + "{# a real template is long #}" * 8
)


def lines_by_stage(folder: Path, reference: Path | None = None) -> dict[str, str]:
    from evalflow.insight.explanation import explain

    out = {}
    for line in explain(folder, reference):
        head, _, why = line.partition(" re-ran: ")
        out[head.split()[-1]] = why
    return out


def run_with(runner: Runner, overrides: list[str], **values: Any) -> Path:
    """A run like ``runner()`` with extra model overrides (``model.salt=x``): its folder."""
    return runner(overrides=overrides, **values)[2]


def test_metric_change(runner: Runner, toy_library: Path) -> None:
    runner()
    yaml_file = toy_library / "toy_mc.yaml"
    yaml_file.write_text(with_acc_norm(yaml_file.read_text()))
    _, _, folder = runner()
    shutil.rmtree(runner.cache)  # explain reads run folders only
    why = lines_by_stage(folder)
    assert set(why) == {"metrics", "aggregate"}
    assert why["metrics"] == "metric_list: + acc_norm"


def test_reduction_change(runner: Runner, toy_library: Path) -> None:
    yaml_file = toy_library / "toy_gen.yaml"
    yaml_file.write_text(
        yaml_file.read_text()
        .replace("  do_sample: false", "  do_sample: true")
        .replace("    higher_is_better: true\n", "    higher_is_better: true\n    reduction: pass@k\n")
        + "repeats: 2\n"
    )
    runner("toy_gen")
    yaml_file.write_text(yaml_file.read_text().replace("reduction: pass@k", "reduction: [maj@k, mean]"))
    _, _, folder = runner("toy_gen")
    shutil.rmtree(runner.cache)
    why = lines_by_stage(folder)
    assert set(why) == {"metrics", "aggregate"}
    assert why["metrics"] == 'metric_list: metric exact_match changed (reduction: "pass@k" → ["maj@k", "mean"])'


def test_filter_change(runner: Runner, toy_library: Path) -> None:
    runner("toy_gen")
    yaml_file = toy_library / "toy_gen.yaml"
    yaml_file.write_text(yaml_file.read_text().replace('regex_pattern: "#### ', 'regex_pattern: "####\\\\s*'))
    _, _, folder = runner("toy_gen")
    why = lines_by_stage(folder)
    assert set(why) == {"filters", "metrics", "aggregate"}
    assert why["filters"].startswith("filter_list: filter get-answer changed (filter.0.regex_pattern: ")
    assert why["metrics"].startswith("filters: filter_list")


def test_limit_change_counts_new_requests(runner: Runner) -> None:
    runner(limit=10)
    _, _, folder = runner(limit=20)
    why = lines_by_stage(folder)
    assert set(why) == {"fewshot", "instances", "inference", "filters", "metrics", "aggregate"}
    assert why["fewshot"] == "limit: 10 → 20"
    assert why["inference"] == "40 of 80 requests new (fewshot: limit: 10 → 20)"


def test_num_fewshot_and_seed(runner: Runner) -> None:
    runner(num_fewshot=0)
    _, _, folder = runner(num_fewshot=2)
    why = lines_by_stage(folder)
    assert "load_docs" not in why and why["fewshot"] == "num_fewshot: 0 → 2"
    _, _, folder = runner(num_fewshot=2, seed=7)
    why = lines_by_stage(folder)
    assert why["fewshot"] == "fewshot_seed: 1234 → 7"
    assert "seed: 1234 → 7" in why["instances"]


def test_data_bytes(runner: Runner, toy_library: Path) -> None:
    runner(limit=5)
    data = toy_library.parent / "data" / "test.jsonl"
    rows = data.read_text().splitlines()
    data.write_text("\n".join(rows[:-1]) + "\n")
    _, _, folder = runner(limit=5)
    why = lines_by_stage(folder)
    assert set(why) == {"load_docs", "fewshot", "instances", "inference", "filters", "metrics", "aggregate"}
    assert why["load_docs"].startswith("data file bytes changed (test split; data fingerprint ")
    assert why["inference"] == "0 of 20 requests new (load_docs: " + why["load_docs"] + ")"


def test_model_identity(runner: Runner) -> None:
    run_with(runner, [], limit=5)
    folder = run_with(runner, ["model.salt=b"], limit=5)
    why = lines_by_stage(folder)
    assert set(why) == {"inference", "filters", "metrics", "aggregate"}
    assert why["inference"] == '20 of 20 requests new (model identity changed (salt: "" → "b"))'


def test_stage_code_change_names_the_module(runner: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit to a module a stage imports re-runs that stage, and explain names the module."""
    import evalflow.dag.node as node

    runner(limit=5)
    real = node.stage_code

    def edited(function: str) -> dict[str, str]:
        code = dict(real(function))
        if "evalflow.taskspec.prompts.fewshot_context" in code:
            code["evalflow.taskspec.prompts.fewshot_context"] = "0" * 32
        return code

    monkeypatch.setattr(node, "stage_code", edited)
    _, _, folder = runner(limit=5)
    why = lines_by_stage(folder)
    assert why["fewshot"] == why["metrics"] == "stage code changed (evalflow.taskspec.prompts.fewshot_context)"
    assert why["instances"] == "fewshot: stage code changed (evalflow.taskspec.prompts.fewshot_context)"
    assert "load_docs" not in why


def test_filter_component_code_change(runner: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edited built-in filter re-runs scoring from filters, and explain names it."""
    import evalflow.scoring.components as components
    from evalflow.scoring import FILTERS

    runner("toy_gen", limit=5)
    target, real = FILTERS.get("regex"), components.code_hash
    monkeypatch.setattr(components, "code_hash", lambda obj: "0" * 32 if obj is target else real(obj))
    _, _, folder = runner("toy_gen", limit=5)
    why = lines_by_stage(folder)
    assert set(why) == {"filters", "metrics", "aggregate"}
    assert why["filters"] == "filter 'regex' code changed"
    assert why["metrics"] == "filters: filter 'regex' code changed"


def test_upgrade_from_a_run_with_version_numbers(runner: Runner) -> None:
    """A run folder written when stage code was a hand-kept number still explains an upgrade."""
    _, _, old = runner(limit=5)
    manifest = json.loads((old / "manifest.json").read_text())
    for stage in manifest["stages"]:
        stage["key"], stage["inputs"]["version"] = stage["key"] + "-old", 1
        del stage["inputs"]["code"]
    (old / "manifest.json").write_text(json.dumps(manifest))
    shutil.rmtree(runner.cache)
    _, _, folder = runner(limit=5)
    why = lines_by_stage(folder)
    assert why["load_docs"] == "stage code changed (the earlier run recorded a code version number, not its modules)"


def test_chat_template(runner: Runner, tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    config = model_dir / "tokenizer_config.json"
    config.write_text(json.dumps({"chat_template": TEMPLATE}))
    args = [f"++model.pretrained={model_dir}"]
    run_with(runner, args, limit=3, apply_chat_template=True)
    config.write_text(json.dumps({"chat_template": TEMPLATE.replace("<|assistant|>", "<|bot|>")}))
    folder = run_with(runner, args, limit=3, apply_chat_template=True)
    why = lines_by_stage(folder)
    assert "load_docs" not in why
    assert why["fewshot"].startswith("chat.template changed (")


def test_against_a_given_run_and_explain_true(runner: Runner, capsys: pytest.CaptureFixture[str]) -> None:
    from evalflow.commands.explain import main

    _, _, first = runner(limit=10)
    runner(limit=20)
    _, _, third = runner(limit=15)  # every request cached; planned keys differ from both
    assert lines_by_stage(third)["fewshot"] == "limit: 20 → 15"  # closest: the 20-document run
    assert lines_by_stage(third, first)["fewshot"] == "limit: 10 → 15"
    assert main([str(first), str(third)]) == 0
    assert "toy_mc inference re-ran: 0 of 60 requests new (fewshot: limit: 10 → 15)" in capsys.readouterr().out
    capsys.readouterr()
    runner(limit=12, explain=True)
    assert "toy_mc fewshot re-ran: limit: 15 → 12" in capsys.readouterr().err


def test_first_run_and_cached_run(runner: Runner) -> None:
    from evalflow.insight.explanation import explain

    _, _, first = runner(limit=5)
    assert explain(first) == ["toy_mc: computed for the first time (no run of toy_mc among earlier run folders)"]
    _, _, second = runner(limit=5)
    assert explain(second) == []


def test_not_a_run_folder(tmp_path: Path) -> None:
    from evalflow.errors import RunFolderError
    from evalflow.insight.explanation import explain

    with pytest.raises(RunFolderError, match="no manifest.json"):
        explain(tmp_path)


def test_model_object_without_identity(toy_library: Path, tmp_path: Path) -> None:
    from evalflow import evaluate
    from evalflow.insight.explanation import explain
    from tests.support.models import IdentitylessModel as NoIdentity  # never cached

    kw = dict(include_path=[str(toy_library)], cache_dir=str(tmp_path / "c"), limit=5, bootstrap_iters=0)
    evaluate("toy_mc", NoIdentity(), output_dir=tmp_path / "outputs" / "a", **kw)
    evaluate("toy_mc", NoIdentity(), output_dir=tmp_path / "outputs" / "b", **kw)
    lines = explain(tmp_path / "outputs" / "b")
    assert [line.split(" re-ran")[0] for line in lines] == [
        f"toy_mc {s}" for s in ("inference", "filters", "metrics", "aggregate")
    ]
    assert all("without identity()" in line for line in lines)
