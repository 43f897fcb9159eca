"""``evalflow lm-eval``'s ``--wandb_args``/``--wandb_config_args``, ``--trackio_args`` and
``--hf_hub_log_args`` against lm-eval 0.4.13's own loggers (installed beside evalflow) given the
same results and samples: W&B offline runs read back and compared record for record, Trackio's
local store compared, and the Hub calls of ``huggingface_hub.HfApi`` (patched: no hub here)
compared call for call."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from evalflow.output.run_paths import samples_files
from tests.support.cli import cli
from tests.support.paths import ROOT

pytest.importorskip("lm_eval.loggers", reason="lm-eval is not installed beside evalflow")

DATE = re.compile(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d+")


def lm_eval_argv(lib: Path, tmp: Path, *extra: str) -> list[str]:
    return [
        "lm-eval",
        "--model",
        "dummy",
        "--model_args",
        "salt=s1",
        "--tasks",
        "toy_mc,toy_gen",
        "--include_path",
        str(lib),
        "--limit",
        "3",
        "--log_samples",
        "--output_path",
        str(tmp / "out"),
        "--use_cache",
        str(tmp / "cache"),
        "--bootstrap_iters",
        "10",
        *extra,
    ]


def written(tmp: Path) -> tuple[Path, list[Path]]:
    results = next((tmp / "out").glob("*/results_*.json"))
    return results, sorted(results.parent.glob("samples_*.jsonl"))


def typed_samples(tmp: Path) -> list[Path]:
    """The run folder's samples files (values typed as lm-eval holds them in memory, before its
    tracker writes them as text), copied under lm-eval's names ``samples_<task>_<date>.jsonl``."""
    [folder] = [p for p in (tmp / "outputs").glob("*/*") if p.is_dir()]
    (tmp / "typed").mkdir(exist_ok=True)
    return [
        Path(shutil.copyfile(path, tmp / "typed" / f"samples_{task}_0.jsonl"))
        for task, path in samples_files(folder).items()
    ]


def peer_log(kind: str, args: dict[str, Any], tmp: Path, env: dict[str, str]) -> None:
    """lm-eval's logger of ``kind`` on the results the evalflow run wrote and its samples as lm-eval's
    logger is given them (in memory, typed), in a child process."""
    results, samples = written(tmp)[0], typed_samples(tmp)
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.lmeval_loggers_peer", kind, json.dumps(args), str(results)]
        + [str(s) for s in samples],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_wandb_args_log_what_lm_evals_wandb_logger_logs(toy_library: Path, tmp_path: Path) -> None:
    pytest.importorskip("wandb", reason="the tracking extra is not installed: pip install 'evalflow[tracking]'")
    from tests.support.wandb_records import records

    env = {"WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    init = {"project": "toys", "job_type": "eval", "group": "g1", "step": 3}
    ours = cli(
        lm_eval_argv(
            toy_library,
            tmp_path,
            "--wandb_args",
            f"project=toys,name=ours,job_type=eval,group=g1,step=3,dir={tmp_path / 'ours'}",
            "--wandb_config_args",
            "team=a",
        ),
        env_extra=env,
        cwd=tmp_path,
    )
    assert ours.returncode == 0, ours.stderr
    peer_log(
        "wandb",
        {"init": {**init, "name": "theirs", "dir": str(tmp_path / "theirs")}, "config": {"team": "a"}},
        tmp_path,
        env,
    )
    logged = {side: _wandb_run(tmp_path / side, records) for side in ("ours", "theirs")}
    assert logged["ours"]["run"] == {"project": "toys", "job_type": "eval", "group": "g1", "name": "ours"}
    logged["theirs"]["run"]["name"] = "ours"
    for key in logged["ours"]:
        assert logged["ours"][key] == logged["theirs"][key], key
    assert "toy_mc/acc" in logged["ours"]["history"][0] and logged["ours"]["tables"]
    assert {"evaluation/eval_results", "toy_mc_eval_results", "toy_gen_eval_results"} <= set(logged["ours"]["tables"])


def _wandb_run(folder: Path, records: Any) -> dict[str, Any]:
    """What an offline run logged: run fields, config, summary, history rows (tables by name),
    artifacts (name, type, files) and the tables' contents."""
    [run_file] = list((folder / "wandb").glob("offline-run-*/run-*.wandb"))
    recs = list(records(run_file))
    [started] = [r.run for r in recs if r.WhichOneof("record_type") == "run"]
    config: dict[str, Any] = {}
    for r in recs:
        if r.WhichOneof("record_type") in ("config", "run"):
            updates = r.config.update if r.WhichOneof("record_type") == "config" else r.run.config.update
            config.update({u.key: json.loads(u.value_json) for u in updates if u.key != "_wandb"})
    history = [
        _kept({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in r.history.item})
        for r in recs
        if r.WhichOneof("record_type") == "history"
    ]
    summary = _kept(
        {
            (u.key or "/".join(u.nested_key)): json.loads(u.value_json)
            for r in recs
            if r.WhichOneof("record_type") == "summary"
            for u in r.summary.update
        }
    )
    artifacts = sorted(
        (
            re.sub(rf"^run-{started.run_id}-([^-]+)(-[\w-]{{6}})?$", r"run-\1", r.artifact.name),  # less id and digest
            r.artifact.type,
            tuple(sorted(m.path for m in r.artifact.manifest.contents)),
        )
        for r in recs
        if r.WhichOneof("record_type") == "artifact"
    )
    media = run_file.parent / "files" / "media" / "table"
    tables = {
        re.sub(r"_\d+_[0-9a-f]+\.table\.json$", "", str(p.relative_to(media))): json.loads(p.read_text())
        for p in sorted(media.rglob("*.table.json"))
    }
    run = {
        "project": started.project,
        "job_type": started.job_type,
        "group": started.run_group,
        "name": started.display_name,
    }
    return {
        "run": run,
        "config": config,
        "history": history,
        "summary": summary,
        "artifacts": artifacts,
        "tables": tables,
    }


VOLATILE = ("/path", "/artifact_path", "/_latest_artifact_path", "/sha256", "/size")


def _kept(items: dict[str, Any]) -> dict[str, Any]:
    """Logged values less a table reference's content hashes and paths (the tables are compared whole)."""
    return {k: v for k, v in items.items() if not k.startswith("_") and not k.endswith(VOLATILE)}


class HubRecorder:
    """``huggingface_hub.HfApi`` with every call recorded, nothing sent (no hub here)."""

    calls: ClassVar[list[tuple[str, dict[str, Any]]]] = []

    def __init__(self, token: str | None = None, **kw: Any) -> None:
        self.token = token

    def whoami(self) -> dict[str, str]:
        return {"name": "me"}

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kw: HubRecorder.calls.append((name, {**dict(enumerate(args)), **kw}))


def _hub_calls(root: Path) -> list[tuple[str, dict[str, Any]]]:
    """The recorded calls, files as paths under ``root`` and the run's date as DATE, then cleared."""
    calls = [
        (
            name,
            {
                k: DATE.sub(
                    "DATE", str(Path(v).relative_to(root)) if k in ("path_or_fileobj", "folder_path") else str(v)
                )
                for k, v in kw.items()
            },
        )
        for name, kw in HubRecorder.calls
    ]
    HubRecorder.calls.clear()
    return calls


def test_hf_hub_log_args_push_as_lm_evals_evaluation_tracker(
    toy_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub
    import huggingface_hub.utils

    from evalflow.commands.lm_eval import main

    monkeypatch.setattr(huggingface_hub, "HfApi", HubRecorder)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    monkeypatch.chdir(tmp_path)
    hub = {"hub_results_org": "org", "details_repo_name": "details", "push_results_to_hub": True}
    hub |= {"push_samples_to_hub": True, "gated": True}
    argv = lm_eval_argv(toy_library, tmp_path)[1:]
    argv[argv.index("salt=s1")] = "pretrained=org/m"
    assert main([*argv, "--hf_hub_log_args", ",".join(f"{k}={v}" for k, v in hub.items())]) == 0
    ours = _hub_calls(tmp_path / "out")

    from lm_eval.loggers import EvaluationTracker

    # lm-eval gates through a raw PUT of the repo's settings (HfApi.update_repo_settings' request)
    monkeypatch.setattr(huggingface_hub.utils, "get_session", lambda: HubRecorder())
    results_file, sample_files = written(tmp_path)
    from tests.support.lmeval_loggers_peer import samples_of

    tracker = EvaluationTracker(output_path=str(tmp_path / "peer"), token="hf_test_token", **hub)
    tracker.general_config_tracker.log_experiment_args("dummy", "pretrained=org/m", None, None, False)
    results, samples = json.loads(results_file.read_text()), samples_of([str(s) for s in sample_files])
    tracker.save_results_aggregated(results=results, samples=samples)
    for task in results["configs"]:
        tracker.save_results_samples(task_name=task, samples=samples[task])
    theirs = _hub_calls(tmp_path / "peer")
    gate = ("update_repo_settings", {0: "org/details-private", "gated": "auto", "repo_type": "dataset"})
    put = (
        "put",
        {"url": "https://huggingface.co/api/datasets/org/details-private/settings", "json": "{'gated': 'auto'}"},
    )
    assert [gate if call[0] == "put" and call[1]["url"] == put[1]["url"] else call for call in theirs] == ours
    assert put[1]["json"] in [c[1].get("json") for c in theirs]
    assert ours[1] == (
        "upload_file",
        {
            "repo_id": "org/details-private",  # results_repo_name defaults to details_repo_name
            "path_or_fileobj": "org__m/results_DATE.json",
            "path_in_repo": "org/m/results_DATE.json",
            "repo_type": "dataset",
            "commit_message": "Adding aggregated results for org/m",
        },
    )


def test_hf_hub_log_args_refused_before_the_run_without_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    from evalflow.errors import ConfigError
    from evalflow.tracking.hub_push import hub_target

    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="no token is set: set HF_TOKEN"):
        hub_target({"push_results_to_hub": True}, True)
    with pytest.raises(ConfigError, match="'push_result' is not among|push_result is not among"):
        hub_target({"push_result": True}, True)
    assert not hub_target({"hub_results_org": "org"}, False).pushes


def test_trackio_args_log_what_lm_evals_trackio_logger_logs(toy_library: Path, tmp_path: Path) -> None:
    pytest.importorskip("trackio", reason="trackio is not installed: pip install trackio")
    stores = {side: tmp_path / f"trackio-{side}" for side in ("ours", "theirs")}
    ours = cli(
        lm_eval_argv(toy_library, tmp_path, "--trackio_args", "project=toys,name=run1,step=2"),
        env_extra={"TRACKIO_DIR": str(stores["ours"])},
        cwd=tmp_path,
    )
    assert ours.returncode == 0, ours.stderr
    peer_log(
        "trackio",
        {"init": {"project": "toys", "name": "run1", "step": 2}},
        tmp_path,
        {"TRACKIO_DIR": str(stores["theirs"])},
    )
    logged = {side: _trackio_logs(store) for side, store in stores.items()}
    for table, rows in logged["ours"].items():
        for ours_row, theirs_row in zip(rows, logged["theirs"][table], strict=True):
            assert ours_row == theirs_row, table
    assert "toy_mc/acc" in json.loads(logged["ours"]["metrics"][0]["metrics"]) and len(logged["ours"]["traces"]) == 6


VARYING = {"id", "run_id", "timestamp", "log_id", "created_at"}  # a row's identity and time, per run


def _trackio_logs(store: Path) -> dict[str, Any]:
    """Every row Trackio stored (config, metrics, traces), its ids and times left out."""
    import sqlite3

    [db] = list(store.glob("*.db"))
    with sqlite3.connect(db) as con:
        con.row_factory = sqlite3.Row
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        rows = {t: [dict(r) for r in con.execute(f"SELECT * FROM {t}")] for t in tables if t != "sqlite_sequence"}
    for row in rows["configs"]:
        row["config"] = {k: v for k, v in json.loads(row["config"]).items() if k != "_Created"}
    for row in rows["traces"]:  # the text searched begins with the trace's id
        row["search_text"] = row["search_text"].split(" ", 1)[1]
    return {t: [{k: v for k, v in r.items() if k not in VARYING} for r in table] for t, table in rows.items()}


def test_trackio_callback_logs_a_native_run(toy_library: Path, tmp_path: Path) -> None:
    """hydra/callbacks=trackio: the same logger on a native run's folder, the composed config with it."""
    pytest.importorskip("trackio", reason="trackio is not installed: pip install trackio")
    from tests.support.tracked_runs import run_args

    store = tmp_path / "trackio"
    done = cli(
        run_args(toy_library, tmp_path, "hydra/callbacks=trackio", "hydra.callbacks.trackio.project=toys"),
        env_extra={"TRACKIO_DIR": str(store)},
    )
    assert done.returncode == 0, done.stderr
    logged = _trackio_logs(store)
    [config] = [row["config"] for row in logged["configs"]]
    assert config["limit"] == 6 and set(config["task_configs"]) == {"toy_mc", "toy_gen"}
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    scores = json.loads(logged["metrics"][0]["metrics"])
    assert scores["toy_mc/acc"] == results["results"]["toy_mc"]["acc,none"]
    assert len(logged["traces"]) == 12
