"""What ``evalflow.simple_evaluate`` records of its arguments, against lm-eval 0.4.13's own
``simple_evaluate`` on the same call (its dummy model, the toy library): ``config.model_args`` as
passed (a string stays the string, a mapping the dict, None is ``""``), a secret in it masked; and
with ``task_manager=`` given, the tasks' metadata is that manager's alone (lm-eval merges the model
args into the metadata only of a TaskManager it builds itself)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalflow import simple_evaluate
from evalflow.lm_eval.tasks import TaskManager
from evalflow.lmeval_compat.evaluate import model_args_as_passed

RUN: dict[str, Any] = {"tasks": ["toy_mc"], "limit": 2, "bootstrap_iters": 0}


@pytest.fixture
def no_hub_tokenizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """lm-eval's dummy model asks the hub for a tokenizer (for results.json's tokenizer fields, which
    these tests do not compare); offline its client retries for a minute: a missing folder fails at once."""
    dummy = pytest.importorskip("lm_eval.models.dummy", reason="lm-eval is not installed beside evalflow")
    monkeypatch.setattr(dummy.DummyLM, "tokenizer_name", str(tmp_path / "no_tokenizer"))


def _theirs(library: Path, model_args: Any, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """lm-eval's simple_evaluate on the same call, in this process."""
    evaluator = pytest.importorskip("lm_eval.evaluator")
    tasks = pytest.importorskip("lm_eval.tasks")
    manager = tasks.TaskManager(include_path=str(library), include_defaults=False, metadata=metadata)
    return evaluator.simple_evaluate(model="dummy", model_args=model_args, task_manager=manager, **RUN)


@pytest.mark.usefixtures("no_hub_tokenizer")
@pytest.mark.parametrize("model_args", ["salt=s,n=3", {"salt": "s", "n": 3}, None])
def test_model_args_are_recorded_as_passed(
    model_args: Any, toy_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / "cache"))
    ours = simple_evaluate("dummy", model_args=model_args, include_path=str(toy_library), **RUN)["config"]
    theirs = _theirs(toy_library, model_args)["config"]
    assert ours["model_args"] == theirs["model_args"] and type(ours["model_args"]) is type(theirs["model_args"])


def test_a_secret_in_model_args_is_masked_where_it_stands() -> None:
    assert model_args_as_passed("pretrained=org/m,token=hf_s,dtype=float32") == (
        "pretrained=org/m,token=<in $HF_TOKEN>,dtype=float32"
    )
    assert model_args_as_passed({"pretrained": "org/m", "auth_token": "t"}) == {
        "pretrained": "org/m",
        "auth_token": "<in $EVALFLOW_LMEVAL_AUTH_TOKEN>",
    }
    assert model_args_as_passed('{"token": "hf_s"}') == '{"token": "<in $HF_TOKEN>"}'
    assert model_args_as_passed("pretrained=org/m,use_auth_token=True") == "pretrained=org/m,use_auth_token=True"


def test_a_secret_given_to_simple_evaluate_stays_out_of_its_results(
    toy_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_TOKEN", "")
    results = simple_evaluate("dummy", model_args="salt=s,token=hf_SECRET", include_path=str(toy_library), **RUN)
    assert results["config"]["model_args"] == "salt=s,token=<in $HF_TOKEN>"
    assert "hf_SECRET" not in repr(results)


@pytest.mark.usefixtures("no_hub_tokenizer")
@pytest.mark.parametrize("metadata", [None, {"k": 1}])
def test_a_given_task_managers_metadata_is_the_tasks_metadata_alone(
    metadata: dict[str, Any] | None, toy_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / "cache"))
    manager = TaskManager(include_path=str(toy_library), include_defaults=False, metadata=metadata)
    ours = simple_evaluate("dummy", model_args="salt=s", task_manager=manager, metadata={"ignored": 1}, **RUN)
    theirs = _theirs(toy_library, "salt=s", metadata)

    def meta(results: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in results["configs"]["toy_mc"].get("metadata", {}).items() if k != "config_source"}

    assert meta(ours) == meta(theirs) and "salt" not in meta(ours)
