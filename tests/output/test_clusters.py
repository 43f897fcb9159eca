"""A task with ``cluster_key`` end to end: each samples line gains ``cluster`` (lm-eval's keys
unchanged), results.json gains a top-level ``clustered_stderr`` (its ``results`` and ``configs``
unchanged), ``Run.clusters`` reads the ids back, editing the key re-runs no stage, and a key that
renders no id is refused before any model call."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from evalflow.errors import TaskError
from evalflow.output.run_folder import load_run
from evalflow.scoring.cluster_stderr import clustered_stderr
from tests.support.models import CountingModel
from tests.support.runs import Runner, stage_hits
from tests.support.toy_tasks import MC_YAML, write_toy_data

# toy_mc's questions are "What is {a} plus {b}?" with b = i % 5 + 2: five clusters of 8 documents
BY_B = "\"{{question.split(' plus ')[1]}}\""
VOLATILE = ("date", "total_evaluation_time_seconds", "pretty_env_info", "git_hash", "upper_git_hash")


def _library(root: Path, cluster_key: str | None) -> Path:
    data = root / "data"
    if not data.exists():
        write_toy_data(root)
    lib = root / "tasks"  # one path: the configs' config_source is the same
    lib.mkdir(exist_ok=True)
    extra = f"cluster_key: {cluster_key}\n" if cluster_key else ""
    (lib / "toy_mc.yaml").write_text(MC_YAML.format(data=data) + extra)
    return lib


def _run(root: Path, cache: Path, cluster_key: str | None, n: int) -> tuple[dict, dict, Path]:
    return Runner(_library(root, cluster_key), cache, root / f"out{n}")()


def _lines(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "samples_toy_mc.jsonl").read_text().splitlines()]


def test_clusters_recorded_beside_lm_evals_fields(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    plain, _, plain_folder = _run(tmp_path, cache, None, 1)
    clustered, manifest, folder = _run(tmp_path, cache, BY_B, 2)
    lines, plain_lines = _lines(folder), _lines(plain_folder)
    assert [{k: v for k, v in line.items() if k != "cluster"} for line in lines] == plain_lines
    assert [line["cluster"] for line in lines[:6]] == ["2?", "3?", "4?", "5?", "6?", "2?"]
    # lm-eval's keys of results.json are as without the key; the clustered stderr sits beside them
    assert {k: v for k, v in clustered.items() if k not in (*VOLATILE, "clustered_stderr")} == {
        k: v for k, v in plain.items() if k not in VOLATILE
    }
    entry = clustered["clustered_stderr"]["toy_mc"]
    acc = [float(line["acc"]) for line in lines]
    expected = clustered_stderr(acc, [line["cluster"] for line in lines])
    assert entry == {"acc,none": pytest.approx(expected), "clusters": 5, "documents": 40, "cluster_key": BY_B[1:-1]}
    assert "clustered_stderr" not in plain
    assert manifest["clustered_stderr"] == clustered["clustered_stderr"]
    run = load_run(folder)
    assert run.clusters("toy_mc") == {line["doc_id"]: line["cluster"] for line in lines}
    assert load_run(plain_folder).clusters("toy_mc") is None
    assert all(stage_hits(manifest).values())  # adding the key: every stage from the cache


def test_changing_cluster_key_reruns_no_stage(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _run(tmp_path, cache, BY_B, 1)
    results, manifest, folder = _run(tmp_path, cache, "\"{{question.split(' ')[2]|int % 2}}\"", 2)
    assert all(stage_hits(manifest).values()) and CountingModel.calls_total == 0
    assert {line["cluster"] for line in _lines(folder)} == {"0", "1"}
    assert results["clustered_stderr"]["toy_mc"]["clusters"] == 2
    assert not math.isnan(results["clustered_stderr"]["toy_mc"]["acc,none"])


def test_key_that_renders_no_id_refused_before_the_model(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match=r"toy_mc.yaml.*`cluster_key: questoin` names no field of document 0"):
        _run(tmp_path, tmp_path / "cache", "questoin", 1)
    assert CountingModel.calls_total == 0


def test_validate_renders_every_cluster_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evalflow.commands.validate import main

    args = ["task=toy_mc", f"include_path=[{_library(tmp_path, BY_B)}]", f"cache_dir={tmp_path / 'cache'}", "n=2"]
    assert main(args) == 0
    capsys.readouterr()
    _library(tmp_path, '"{{questoin}}"')
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "cluster_key, document 0" in err and "questoin" in err
