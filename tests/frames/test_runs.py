"""A run's summary, its detail and ``runs_df``, checked field by field against the files the runs
wrote: real ``dummy`` runs (a group, a partial run, a command-line sweep), lm-eval 0.4.13's own
output folder, a run with a snapshot and no results."""

from __future__ import annotations

import json
import shlex
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from evalflow.frames import runs_df
from evalflow.frames.discovery import RunEntry, find_runs
from evalflow.frames.runs import count_lines, run_detail, run_summary
from evalflow.frames.status import read_events
from evalflow.output.run_paths import (
    lmeval_samples_files,
    manifest_file,
    results_file,
    samples_file,
    snapshot_config,
    snapshot_dir,
)
from tests.support.cli import cli
from tests.support.live_runs import GATED, live_run
from tests.support.view_runs import LIMIT, SWEEP, ViewRuns, make_view_runs

ARC = "lm/smollm2/results_2026-11-30T12-10-26.442646.json"
GSM8K = "lm/smollm2/results_2026-11-30T12-37-32.402397.json"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> ViewRuns:
    return make_view_runs(tmp_path_factory.mktemp("view_runs"))


@pytest.fixture(scope="module")
def entries(runs: ViewRuns) -> dict[str, RunEntry]:
    return {e.id: e for e in find_runs([runs.root])}


def _results(path: Path) -> dict:
    return json.loads(path.read_text())


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, tz=UTC).isoformat()


def test_an_evalflow_runs_summary(runs: ViewRuns, entries: dict[str, RunEntry]) -> None:
    results = _results(results_file(runs.grouped))
    summary = run_summary(entries["single/grouped"])
    assert summary == {
        "id": "single/grouped",
        "layout": "evalflow",
        "path": str(runs.grouped),
        "model": "dummy",
        "model_label": "dummy",
        "tasks": ["toy_mc", "toy_gen"],
        "date": _iso(results["date"]),
        "status": "complete",
        "metrics": {
            "toy_mc": {
                "metric": "acc,none",
                "value": results["results"]["toy_mc"]["acc,none"],
                "stderr": results["results"]["toy_mc"]["acc_stderr,none"],
            },
            "toy_gen": {
                "metric": "exact_match,get-answer",
                "value": results["results"]["toy_gen"]["exact_match,get-answer"],
                "stderr": results["results"]["toy_gen"]["exact_match_stderr,get-answer"],
            },
            "toy_group": {
                "metric": "acc,none",
                "value": results["results"]["toy_group"]["acc,none"],
                "stderr": results["results"]["toy_group"]["acc_stderr,none"],
            },
        },
        "overrides": {},  # evaluate() gives no command-line words
        "sweep": None,
        "partial": None,
        "left_out": [],
    }
    assert isinstance(summary["metrics"]["toy_mc"]["stderr"], float)  # a real stderr, not "N/A"
    json.dumps(summary)  # plain JSON values only


def test_a_partial_runs_summary_says_so(runs: ViewRuns, entries: dict[str, RunEntry]) -> None:
    summary = run_summary(entries["single/partial"])
    whole = _results(results_file(runs.partial))["n-samples"]["toy_mc"]["original"]  # toy_mc's 40 documents
    assert summary["partial"] == f"partial: toy_mc 3 of {whole}" and whole == 40
    assert summary["tasks"] == ["toy_mc"]


def test_a_sweeps_jobs_carry_their_overrides_and_the_sweeps_id(runs: ViewRuns, entries: dict[str, RunEntry]) -> None:
    jobs = [run_summary(entries[f"{SWEEP}/{n}"]) for n in (0, 1)]
    for n, job in enumerate(jobs):
        assert job["sweep"] == SWEEP
        assert job["overrides"] == {
            "model": "dummy",
            "task": "toy_mc",
            "include_path": f"[{runs.library}]",
            "cache_dir": str(runs.cache),
            "limit": str(LIMIT),
            "num_fewshot": str(n),
        }  # hydra.sweep.dir, Hydra's own word, left out
    detail = run_detail(entries[f"{SWEEP}/1"])
    assert next(r for r in detail["results"] if r["name"] == "toy_mc")["n_shot"] == 1


def test_an_lm_eval_runs_summary_reads_its_own_results_file(runs: ViewRuns, entries: dict[str, RunEntry]) -> None:
    results = _results(runs.root / ARC)
    summary = run_summary(entries[ARC])
    assert summary["layout"] == "lm-eval" and summary["path"] == str(runs.root / ARC)
    assert summary["model"] == results["model_name"] and summary["tasks"] == ["arc_easy"]
    # the short name shown (the full one in its title): the last part of a path or hub id
    assert summary["model_label"] == results["model_name"].rstrip("/").rsplit("/", 1)[-1]
    assert summary["date"] == _iso(results["date"])
    assert summary["metrics"] == {
        "arc_easy": {"metric": "acc,none", "value": 0.6, "stderr": results["results"]["arc_easy"]["acc_stderr,none"]}
    }
    assert (summary["overrides"], summary["sweep"], summary["partial"]) == ({}, None, None)
    assert run_summary(entries[GSM8K])["tasks"] == ["gsm8k"]  # the other run in the same folder


def test_a_run_without_results_shows_its_snapshots_model_and_tasks(
    runs: ViewRuns, entries: dict[str, RunEntry]
) -> None:
    summary = run_summary(entries["stopped"])
    assert (summary["model"], summary["tasks"], summary["metrics"]) == ("dummy", ["toy_group"], {})
    assert summary["status"] == "failed"  # no events, its snapshot written long ago
    assert summary["date"] == _iso(snapshot_dir(runs.stopped).stat().st_mtime)
    detail = run_detail(entries["stopped"])
    assert detail["results"] == [] and detail["samples"] == []
    assert detail["config_yaml"] == snapshot_config(runs.stopped).read_text()
    assert detail["progress"] is None  # no events file to read


def test_a_running_run_shows_its_events_then_its_results(tmp_path: Path) -> None:
    with live_run(tmp_path) as run:
        run.wait_progress()  # held in its second model call
        (entry,) = find_runs([tmp_path])
        assert (entry.id, entry.results) == ("run", None)
        summary = run_summary(entry)
        assert (summary["status"], summary["tasks"], summary["metrics"]) == ("running", ["toy_mc"], {})
        assert summary["model"] == GATED
        detail = run_detail(entry)
        progress = detail["progress"]
        assert progress is not None and progress["status"] == "running"
        events = read_events(run.folder)
        assert events is not None and events.start is not None
        assert summary["date"] == _iso(events.start["time"])  # when it started
        ((label, figures),) = progress["tasks"].items()
        assert "toy_mc" in label and figures["done"] >= 4 and figures["total"] == 40
        run.release()
        run.wait_done()
    (entry,) = find_runs([tmp_path])
    done = run_summary(entry)
    assert done["status"] == "complete" and set(done["metrics"]) == {"toy_mc"}
    assert done["model_label"] == summary["model_label"] == GATED  # one name, running and finished
    assert run_detail(entry)["progress"] is None


def test_an_evalflow_runs_detail(runs: ViewRuns, entries: dict[str, RunEntry]) -> None:
    results = _results(results_file(runs.grouped))
    manifest = json.loads(manifest_file(runs.grouped).read_text())
    detail = run_detail(entries["single/grouped"])
    assert [(r["name"], r["kind"], r["depth"]) for r in detail["results"]] == [
        ("toy_group", "group", 0),
        ("toy_mc", "task", 1),
        ("toy_gen", "task", 1),
    ]
    mc = detail["results"][1]
    assert mc == {
        "name": "toy_mc",
        "kind": "task",
        "depth": 1,
        "n_shot": results["n-shot"]["toy_mc"],
        "n_samples": LIMIT,
        "higher_is_better": {"acc": True},
        "metrics": [
            {
                "metric": "acc",
                "filter": "none",
                "value": results["results"]["toy_mc"]["acc,none"],
                "stderr": results["results"]["toy_mc"]["acc_stderr,none"],
            }
        ],
    }
    assert detail["results"][0]["n_samples"] == 2 * LIMIT  # the group: its members' documents
    assert detail["config_yaml"] == snapshot_config(runs.grouped).read_text()
    assert detail["command"] == shlex.join(
        [
            "python",
            "-m",
            "evalflow",
            "--config-dir",
            str(snapshot_dir(runs.grouped.resolve())),
            "--config-name",
            "config",
        ]
    )
    figures = detail["manifest"]
    assert figures["inference"] == manifest["inference"] and figures["workers"] == manifest["workers"]
    assert figures["code_execution"] == manifest["code_execution"] and figures["seconds"] == manifest["seconds"]
    assert figures["stages"] == [
        {"task": e["task"], "stage": e["stage"], "cached": e["hit"], "seconds": e["seconds"]}
        for e in manifest["stages"]
    ]
    assert detail["trackers"] == []
    assert detail["samples"] == [{"task": "toy_gen", "count": LIMIT}, {"task": "toy_mc", "count": LIMIT}]
    assert detail["progress"] is None
    json.dumps(detail)


def test_the_command_reproduces_the_run_from_its_cache(
    runs: ViewRuns, entries: dict[str, RunEntry], tmp_path: Path
) -> None:
    command = run_detail(entries["single/grouped"])["command"]
    done = cli(shlex.split(command)[3:], cwd=tmp_path)  # after "python -m evalflow"
    assert done.returncode == 0, done.stderr
    folder = Path(done.stdout.strip().splitlines()[-1].removeprefix("run folder: "))
    again, first = _results(results_file(folder)), _results(results_file(runs.grouped))
    assert again["results"] == first["results"]
    assert json.loads(manifest_file(folder).read_text())["inference"]["computed"] == 0  # every answer from the cache


def test_an_lm_eval_runs_detail(runs: ViewRuns, entries: dict[str, RunEntry]) -> None:
    results = _results(runs.root / GSM8K)
    detail = run_detail(entries[GSM8K])
    assert [(r["name"], r["kind"], r["depth"], r["n_shot"]) for r in detail["results"]] == [
        ("gsm8k", "task", 0, results["n-shot"]["gsm8k"])
    ]
    assert {(m["metric"], m["filter"]) for m in detail["results"][0]["metrics"]} == {
        ("exact_match", "strict-match"),
        ("exact_match", "flexible-extract"),
    }
    assert yaml.safe_load(detail["config_yaml"]) == results["config"]
    assert detail["command"] is None  # no snapshot to rerun
    assert detail["manifest"] == {
        "inference": {},
        "judge": None,
        "stages": [],
        "workers": {},
        "code_execution": {},
        "seconds": None,
    }
    (samples,) = lmeval_samples_files(runs.root / GSM8K).values()
    assert detail["samples"] == [{"task": "gsm8k", "count": len(samples.read_text().splitlines())}]


def test_runs_df_one_row_per_run_with_stable_columns(runs: ViewRuns) -> None:
    df = runs_df([runs.root / "single", str(runs.root / "multirun"), runs.lm_eval])
    assert list(df.columns[:11]) == [
        "run_id",
        "path",
        "layout",
        "model",
        "model_label",
        "date",
        "status",
        "tasks",
        "n_tasks",
        "sweep",
        "partial",
    ]
    assert sorted(df["run_id"]) == sorted(
        [
            "0:grouped",
            "0:partial",
            "1:2026-12-06/18-00-00-abc/0",
            "1:2026-12-06/18-00-00-abc/1",
            f"2:{Path(ARC).name}",
            f"2:{Path(GSM8K).name}",
        ]
    )
    rows = df.set_index("run_id")
    grouped = _results(results_file(runs.grouped))
    assert rows.loc["0:grouped", "toy_group/acc,none"] == grouped["results"]["toy_group"]["acc,none"]
    assert rows.loc["0:grouped", "n_tasks"] == 2 and rows.loc["0:grouped", "tasks"] == ["toy_mc", "toy_gen"]
    assert rows.loc[f"2:{Path(ARC).name}", "arc_easy/acc,none"] == 0.6
    sweep = df[df["sweep"] == "1:2026-12-06/18-00-00-abc"]
    assert sorted(sweep["override.num_fewshot"]) == ["0", "1"]
    assert str(df["date"].dt.tz) == "UTC"  # timestamps, not text
    assert rows.loc["0:grouped", "date"].isoformat() == _iso(grouped["date"])
    assert df["date"].is_monotonic_decreasing  # newest first
    assert rows.loc["0:partial", "status"] == "partial" and rows.loc["0:partial", "partial"].startswith("partial: ")
    assert (df[df["run_id"] != "0:partial"]["status"] == "complete").all()


def test_count_lines_counts_records_and_recounts_a_growing_file(tmp_path: Path) -> None:
    path = samples_file(tmp_path, "t")
    path.write_text('{"a": 1}\n{"a": 2}')  # the last line without its newline
    assert count_lines(path) == 2
    with open(path, "a") as fh:
        fh.write('\n{"a": 3}\n')
    assert count_lines(path) == 3
    path.write_text("")
    assert count_lines(path) == 0


def test_a_damaged_results_file_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    results_file(folder).write_text('{"results": ')
    (entry,) = find_runs([folder])
    summary = run_summary(entry)  # listed, as unreadable, with the reason: the other runs are not affected
    assert summary["status"] == "unreadable"
    assert "run/results.json: not valid JSON" in summary["error"]


def test_the_summary_and_runs_df_never_open_a_samples_file(runs: ViewRuns, tmp_path: Path) -> None:
    """The runs list reads results files only: here every samples file is a link to nothing."""
    folder = tmp_path / "copy"
    shutil.copytree(runs.grouped, folder)
    for task in ("toy_mc", "toy_gen"):
        samples_file(folder, task).unlink()
        samples_file(folder, task).symlink_to(tmp_path / "gone.jsonl")
    (entry,) = find_runs([folder])
    assert run_summary(entry)["metrics"] == run_summary(find_runs([runs.grouped])[0])["metrics"]
    assert runs_df([folder])["toy_group/acc,none"].tolist() == [
        _results(results_file(runs.grouped))["results"]["toy_group"]["acc,none"]
    ]
