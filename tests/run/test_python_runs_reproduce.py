"""Python runs reproduce like command-line runs (issue 20, item 4): evaluate(output_dir=D) writes the
snapshot a CLI run writes, `--config-dir D/.hydra` reproduces it (every stage from the cache, the
same numbers); a model object is recorded by its class and identity, and reproducing it says it
cannot be re-created; evaluate()'s default model is the command line's."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from evalflow import evaluate
from tests.support.cli import cli
from tests.support.models import UserModel
from tests.support.runs import stage_hits


def test_a_python_run_reproduces_from_its_snapshot(toy_library: Path, tmp_path: Path) -> None:
    first = tmp_path / "first"
    results = evaluate(
        "toy_mc",
        "dummy",
        output_dir=first,
        include_path=[str(toy_library)],
        limit=7,
        num_fewshot=1,
        cache_dir=str(tmp_path / "cache"),
        bootstrap_iters=0,
        overrides=["model.salt=s1"],
    )
    snapshot = yaml.safe_load((first / ".hydra" / "config.yaml").read_text())
    assert snapshot["model"]["salt"] == "s1" and snapshot["limit"] == 7 and snapshot["task"] == "toy_mc"
    again = tmp_path / "again"
    done = cli(["--config-dir", str(first / ".hydra"), "--config-name", "config", f"hydra.run.dir={again}"])
    assert done.returncode == 0, done.stderr
    reproduced = json.loads((again / "results.json").read_text())
    assert reproduced["results"] == results["results"]
    manifest = json.loads((again / "manifest.json").read_text())
    assert all(stage_hits(manifest).values())  # the same keys: nothing recomputed


def test_a_model_object_is_recorded_and_reproducing_it_says_why_not(toy_library: Path, tmp_path: Path) -> None:
    folder = tmp_path / "obj"
    evaluate(
        "toy_mc",
        UserModel("good"),
        output_dir=folder,
        include_path=[str(toy_library)],
        limit=3,
        cache_dir=str(tmp_path / "cache"),
        bootstrap_iters=0,
    )
    model = yaml.safe_load((folder / ".hydra" / "config.yaml").read_text())["model"]
    assert model["type"] == "python-object" and model["class"] == "tests.support.models.UserModel"
    done = cli(["--config-dir", str(folder / ".hydra"), "--config-name", "config", f"hydra.run.dir={tmp_path / 'r'}"])
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "a snapshot cannot re-create an object" in done.stderr and "tests.support.models.UserModel" in done.stderr


def test_evaluate_defaults_to_the_command_line_default_model(monkeypatch) -> None:
    import evalflow.run.phases as app

    seen = {}
    monkeypatch.setattr(
        app,
        "run",
        lambda settings, output_dir=None, model=None, preset=None, selection=None: seen.setdefault(
            "model", settings.model
        ),
    )
    evaluate("arith_mc")
    composed = cli(["--cfg", "job", "--resolve"])
    assert composed.returncode == 0, composed.stderr
    assert dict(seen["model"]) == yaml.safe_load(composed.stdout)["model"]
