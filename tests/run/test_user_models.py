"""A model class of the user's own, named by ``model.type`` alone, and the model a run's records
name (issue 19, defects 6 and 7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalflow import evaluate
from evalflow.config.messages import unknown_model_key
from evalflow.errors import ConfigError
from evalflow.output.run_folder import finished_run
from evalflow.tracking.logged import tracker_params
from tests.support.cli import cli
from tests.support.models import UserModel

STRICT = "tests.support.models:StrictModel"


def run_args(lib: Path, tmp: Path, *extra: str) -> list[str]:
    return [
        f"model.type={STRICT}",
        "task=toy_mc",
        f"include_path=[{lib}]",
        f"cache_dir={tmp / 'cache'}",
        "bootstrap_iters=0",
        "limit=4",
        f"hydra.run.dir={tmp / 'run'}",
        *extra,
    ]


def test_a_class_given_by_model_type_alone_gets_only_the_keys_set(toy_library: Path, tmp_path: Path) -> None:
    done = cli(run_args(toy_library, tmp_path, "+model.speed=3"))
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["config"]["model"] == STRICT and results["config"]["model_args"] == {"speed": 3}
    assert results["model_name"] == STRICT
    logged = tracker_params(finished_run(tmp_path / "run"))  # what the trackers log as parameters
    assert logged["model.type"] == STRICT and "model.pretrained" not in logged


def test_a_key_the_class_does_not_take_is_one_paragraph(toy_library: Path, tmp_path: Path) -> None:
    done = cli(run_args(toy_library, tmp_path, "+model.zap=1"))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "StrictModel" in done.stderr and "'zap'" in done.stderr and "takes speed" in done.stderr


def test_evaluate_with_a_class_mapping_refuses_a_key_it_does_not_take(toy_library: Path, tmp_path: Path) -> None:
    results = evaluate(
        "toy_mc",
        {"type": STRICT, "speed": 2},
        include_path=[str(toy_library)],
        cache_dir=str(tmp_path / "c"),
        limit=4,
        bootstrap_iters=0,
    )
    assert results["config"]["model_args"] == {"speed": 2}
    with pytest.raises(ConfigError, match="takes no key 'pretrained'"):
        evaluate(
            "toy_mc",
            {"type": STRICT, "pretrained": "x"},
            include_path=[str(toy_library)],
            cache_dir=str(tmp_path / "c"),
            limit=4,
        )


def test_an_unknown_model_key_lists_the_keys_once() -> None:
    message = unknown_model_key("zzzz", {"type": "hf", "pretrained": "p", "dtype": "auto"})
    assert message.count("pretrained") == 1 and "valid names" not in message


class NamedModel(UserModel):
    def identity(self) -> dict[str, Any]:
        return {"name": "my-model", "version": 2}


@pytest.mark.parametrize(
    "model, name, args", [(NamedModel(), "my-model", {"version": 2}), (UserModel(), "UserModel", {})]
)
def test_results_name_the_model_object_that_ran(
    model: Any, name: str, args: dict, toy_library: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    evaluate(
        "toy_mc",
        model,
        output_dir=out,
        include_path=[str(toy_library)],
        cache_dir=str(tmp_path / "c"),
        limit=4,
        bootstrap_iters=0,
    )
    results = json.loads((out / "results.json").read_text())
    assert (results["config"]["model"], results["model_name"], results["model_source"]) == (name, name, name)
    assert results["config"]["model_args"] == args and "pretrained" not in json.dumps(results)
    logged = tracker_params(finished_run(out))  # what MLflow logs as parameters (W&B: summary's model_name)
    assert logged["model_name"] == name and logged["model.type"] == "python-object"


def test_objects_whose_identity_cannot_see_them_are_never_served_each_others_answers(
    toy_library: Path, tmp_path: Path
) -> None:
    """Two DummyModel objects with different salts: their classmethod identity() describes a config,
    not the object, so caching them would serve the second the first one's answers."""
    from evalflow.models.dummy import DummyModel

    kw = dict(include_path=[str(toy_library)], cache_dir=str(tmp_path / "c"), limit=20, bootstrap_iters=0)
    first = evaluate("toy_mc", DummyModel(salt="x"), **kw)["results"]["toy_mc"]["acc,none"]
    other = evaluate("toy_mc", DummyModel(salt="y"), **kw)["results"]["toy_mc"]["acc,none"]
    alone = evaluate("toy_mc", DummyModel(salt="y"), **dict(kw, cache_dir=str(tmp_path / "fresh")))["results"][
        "toy_mc"
    ]["acc,none"]
    assert other == alone and first != other


def test_a_model_type_registered_by_a_module_of_imports(toy_library: Path, tmp_path: Path) -> None:
    """``imports=`` is imported before ``model.type`` is looked up, so the module it names may register
    the model type a run uses (docs/model-backends.md)."""
    module = tmp_path / "registers_strict.py"
    module.write_text(
        "from evalflow import register_model\nfrom tests.support.models import StrictModel\n\n"
        "register_model('strict_by_imports')(StrictModel)\n"
    )
    results = evaluate(
        "toy_mc",
        {"type": "strict_by_imports", "speed": 2},
        include_path=[str(toy_library)],
        imports=[str(module)],
        cache_dir=str(tmp_path / "c"),
        limit=4,
        bootstrap_iters=0,
    )
    assert results["config"]["model"] == "strict_by_imports" and results["config"]["model_args"] == {"speed": 2}
