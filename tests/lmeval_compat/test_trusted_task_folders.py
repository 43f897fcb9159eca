"""Task folders with code under the front door, trusted as lm-eval trusts them: ``--include_path DIR``
(and ``simple_evaluate(include_path=...)``), ``--tasks DIR`` (each ``*.yaml`` directly in it, as
lm-eval 0.4.13's ``EvaluatorConfig.process_tasks`` reads a folder) and ``--tasks x.yaml`` run their
``!function`` code, saying so in one line naming the folder; the native command keeps requiring
``trust_task_code=true``. ``--confirm_run_unsafe_code`` picks the strongest sandbox there is. The
peer check runs lm-eval's dummy model and the front door on the same folder and compares prompts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalflow import simple_evaluate
from evalflow.commands.lm_eval import main
from evalflow.errors import UnsafeCodeError
from evalflow.lmeval_compat.parser import parse
from evalflow.lmeval_compat.task_settings import strongest_sandbox
from evalflow.lmeval_compat.translate import translate
from evalflow.sandbox import bubblewrap
from evalflow.taskspec.catalog.index import TaskIndex
from tests.support.parity_harness import COMPARE, ROOT
from tests.support.parity_harness import missing as peer_missing
from tests.support.peer_runs import run_argvs

TASK = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
process_docs: !function utils.process_docs
doc_to_text: !function utils.doc_to_text
doc_to_target: label
doc_to_choice: ["no", "yes"]
metric_list:
  - metric: acc
"""
UTILS = """def process_docs(dataset):
    return dataset.map(lambda doc: {"q": doc["q"].strip() + "?"})


def doc_to_text(doc):
    return "Question: " + doc["q"].upper() + "\\nAnswer:"
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A home-made lm-eval task folder: two tasks whose prompts come from its utils.py."""
    tasks = tmp_path / "my_tasks"
    tasks.mkdir()
    data = tasks / "data.jsonl"
    data.write_text("".join(json.dumps({"q": f" is {i} odd ", "label": i % 2}) + "\n" for i in range(4)))
    for name in ("home_a", "home_b"):
        (tasks / f"{name}.yaml").write_text(TASK.format(name=name, data=data))
    (tasks / "utils.py").write_text(UTILS)
    return tasks


def test_named_folders_and_files_are_trusted_names_are_not(folder: Path) -> None:
    for argv in (
        ["--tasks", "home_a", "--include_path", str(folder)],
        ["--tasks", str(folder)],
        ["--tasks", f"arc_easy,{folder / 'home_a.yaml'}"],
    ):
        assert "trust_task_code=true" in translate(parse(["--model", "dummy", *argv])).overrides
    assert "trust_task_code=true" not in translate(parse(["--model", "dummy", "--tasks", "arc_easy"])).overrides
    with pytest.raises(UnsafeCodeError, match="trust_task_code=true"):  # the native command: still explicit
        TaskIndex.build([folder]).resolve("home_a")


def _front_door(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / "cache"))
    return main(["--model", "dummy", *argv, "--log_samples", "--output_path", str(tmp_path / "out")])


def _prompts(out: Path, task: str) -> list[str]:
    [path] = out.rglob(f"samples_{task}_*.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [row["arguments"]["gen_args_0"]["arg_0"] for row in rows]


def test_include_path_code_runs_and_one_line_names_the_folder(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert _front_door(["--tasks", "home_a", "--include_path", str(folder)], tmp_path, monkeypatch) == 0
    lines = [r.getMessage() for r in caplog.records if "running task code" in r.getMessage()]
    assert lines == [
        f"running task code from {os.path.realpath(folder)} (utils.process_docs, utils.doc_to_text): "
        "trust_task_code=true trusts the folders and files you name, as lm-eval does"
    ]
    assert _prompts(tmp_path / "out", "home_a")[0] == "Question: IS 0 ODD?\nAnswer:"


def test_the_code_line_is_said_once_with_write_out_and_check_integrity(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """--write_out and --check_integrity run the folder's code before the run: the tasks are selected
    once, for them and for the run, so the line naming the folder is said once."""
    argv = ["--tasks", "home_a", "--include_path", str(folder), "--write_out", "--check_integrity", "--limit", "2"]
    assert _front_door(argv, tmp_path, monkeypatch) == 0
    assert sum("running task code" in r.getMessage() for r in caplog.records) == 1
    assert _prompts(tmp_path / "out", "home_a")[0] == "Question: IS 0 ODD?\nAnswer:"


def test_tasks_folder_runs_each_yaml_in_it(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert _front_door(["--tasks", str(folder), "--limit", "2"], tmp_path, monkeypatch) == 0
    assert "running task code from" in caplog.text
    assert [len(_prompts(tmp_path / "out", t)) for t in ("home_a", "home_b")] == [2, 2]


def test_simple_evaluate_include_path_is_trusted(folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / "cache"))
    results = simple_evaluate(model="dummy", tasks=["home_b"], include_path=str(folder), limit=1)
    assert (
        results["samples"]["home_b"][0]["arguments"][0][0] == "Question: IS 0 ODD?\nAnswer:"
    )  # lm-eval's in-memory form


def test_confirm_run_unsafe_code_takes_the_strongest_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["--model", "dummy", "--tasks", "humaneval", "--confirm_run_unsafe_code"]
    monkeypatch.setattr(bubblewrap, "_probe", lambda: None)
    isolated = translate(parse(argv))
    assert "code_sandbox=bwrap" in isolated.overrides and "confirm_unsafe_code=true" in isolated.overrides
    monkeypatch.setattr(bubblewrap, "_probe", lambda: "bwrap is not installed")
    plain = translate(parse(argv))
    assert "code_sandbox=subprocess" in plain.overrides
    [note] = [n for n in plain.notes if n.startswith("--confirm_run_unsafe_code")]
    assert "bwrap is not installed" in note and "subprocess sandbox" in note
    assert strongest_sandbox()[0] == "subprocess"


@pytest.mark.skipif(peer_missing() is not None, reason=str(peer_missing()))
def test_humaneval_without_bubblewrap_runs_in_the_subprocess_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal naming code_sandbox=subprocess is gone: built-in humaneval runs and scores."""
    monkeypatch.setattr(bubblewrap, "_probe", lambda: "bwrap is not installed")
    monkeypatch.setenv("EVALFLOW_DATA_MAP", str(ROOT / "conf" / "data_maps" / "shared.yaml"))
    argv = ["--tasks", "humaneval", "--limit", "1", "--confirm_run_unsafe_code", "--gen_kwargs", "max_gen_toks=8"]
    assert _front_door(argv, tmp_path, monkeypatch) == 0
    assert "code_sandbox=subprocess" in capsys.readouterr().err
    [results] = (tmp_path / "out").rglob("results_*.json")
    assert "pass@1,create_test" in json.loads(results.read_text())["results"]["humaneval"]


@pytest.mark.slow
@pytest.mark.skipif(peer_missing() is not None, reason=str(peer_missing()))
def test_the_same_folder_gives_lm_evals_prompts(folder: Path, tmp_path: Path) -> None:
    """lm-eval 0.4.13 (one process) and the front door on ``--include_path DIR --tasks home_a`` and
    ``--tasks DIR``, lm-eval's dummy model on both sides: the same prompts, document by document."""
    runs = {"include": ["--tasks", "home_a", "--include_path", str(folder)], "folder": ["--tasks", str(folder)]}
    common = ["--model", "dummy", "--log_samples"]
    run_argvs([[*common, *argv, "--output_path", str(tmp_path / "peer" / key)] for key, argv in runs.items()])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALFLOW_CACHE": str(tmp_path / "cache")}
    for key, argv in runs.items():
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "evalflow",
                "lm-eval",
                *common,
                *argv,
                "--output_path",
                str(tmp_path / "ours" / key),
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
    for key, task in (("include", "home_a"), ("folder", "home_a"), ("folder", "home_b")):
        [reference] = (tmp_path / "peer" / key).rglob(f"samples_{task}_*.jsonl")
        [candidate] = (tmp_path / "ours" / key).rglob(f"samples_{task}_*.jsonl")
        compared = subprocess.run(
            [sys.executable, str(COMPARE), str(reference), str(candidate), "--prompts-only"],
            capture_output=True,
            text=True,
        )
        assert compared.returncode == 0 and "prompts: 0 documents differ" in compared.stdout, compared.stdout
