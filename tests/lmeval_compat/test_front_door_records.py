"""What the front door writes where lm-eval writes something of the user's: a hub token given in
``--model_args`` is kept in ``HF_TOKEN`` (the printed command, the config snapshot, results.json
and lm-eval's files never hold it; the translation carries it and the run sets it), and
``git_hash`` is the commit of the folder the command runs in, as lm-eval's ``git describe --always``
records it (not evalflow's checkout)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from evalflow.lmeval_compat.execute import execute, working_folder_commit
from evalflow.lmeval_compat.parser import parse
from evalflow.lmeval_compat.translate import translate
from tests.support.cli import cli
from tests.support.toy_tasks import write_toy_library

SECRET = "hf_SECRET_token_123"


def test_a_hub_token_goes_to_hf_token_and_nowhere_else(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_TOKEN", "")
    monkeypatch.delenv("HF_TOKEN")
    tr = translate(parse(["--model", "hf", "--model_args", f"pretrained=org/m,token={SECRET}", "--tasks", "t"]))

    assert "HF_TOKEN" not in os.environ and tr.environment == {"HF_TOKEN": SECRET}  # translate is pure
    assert SECRET not in tr.native() and SECRET not in repr(tr) and SECRET not in " ".join(tr.notes)
    assert tr.lm_model_args["token"] == "<in $HF_TOKEN>"
    kept = translate(parse(["--model", "hf", "--model_args", "pretrained=org/m,use_auth_token=True", "--tasks", "t"]))
    assert "+model.from_pretrained_kwargs.use_auth_token=true" in kept.overrides  # a switch is no secret
    assert kept.environment == {}


def test_execute_sets_the_secret_before_the_model_is_built(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from evalflow.run import phases

    monkeypatch.setenv("HF_TOKEN", "")
    monkeypatch.delenv("HF_TOKEN")
    tr = translate(parse(["--model", "hf", "--model_args", f"pretrained=org/m,token={SECRET}", "--tasks", "t"]))
    seen: list[str | None] = []

    def run(tasks: list[str], model: str, **kwargs: object) -> dict[str, object]:
        seen.append(os.environ.get("HF_TOKEN"))  # where huggingface_hub reads it when the model loads
        return {"results": {}}

    monkeypatch.setattr(phases, "evaluate", run)
    execute(tr, tmp_path / "run")
    assert seen == [SECRET]


def test_git_hash_is_the_working_folders_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert working_folder_commit() is None  # no repository here
    (tmp_path / "lib").mkdir()
    library = write_toy_library(tmp_path / "lib")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)
    commit = subprocess.run(["git", "describe", "--always"], cwd=tmp_path, capture_output=True, text=True).stdout
    env = {"EVALFLOW_CACHE": str(tmp_path / "cache"), "HF_TOKEN": ""}
    argv = ["lm-eval", "--model", "dummy", "--model_args", f"token={SECRET}", "--include_path", str(library)]
    done = cli([*argv, "--tasks", "toy_mc", "--limit", "2", "--output_path", "out"], cwd=tmp_path, env_extra=env)
    assert done.returncode == 0, done.stderr
    [results] = list((tmp_path / "out").glob("*/results_*.json"))

    assert json.loads(results.read_text())["git_hash"] == commit.strip()
    written = [p for p in tmp_path.rglob("*") if p.is_file() and ".git" not in p.parts and "cache" not in p.parts]
    assert written and not [p for p in written if SECRET in p.read_text(errors="replace")]
