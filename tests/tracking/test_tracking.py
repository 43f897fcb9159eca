"""hydra/callbacks=wandb and hydra/callbacks=mlflow, for real: W&B in offline mode and MLflow's
SQLite store, each read back (scores, config snapshot, artifacts); no credential lands in any file
written. No MLflow opt-in variable is set here, as a user would not have one; a tracker that cannot
log is refused before the evaluation or ends the run with exit 1 (tests/tracking/test_failures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.cli import cli
from tests.support.tracked_runs import run_args

wandb = pytest.importorskip("wandb", reason="the tracking extra is not installed: pip install 'evalflow[tracking]'")
mlflow = pytest.importorskip("mlflow", reason="the tracking extra is not installed: pip install 'evalflow[tracking]'")

SECRETS = {
    "WANDB_API_KEY": "local-0123456789abcdef0123456789abcdef01234567",
    "MLFLOW_TRACKING_PASSWORD": "hunter2-not-for-files",
    "MLFLOW_TRACKING_TOKEN": "token-not-for-files",
}


def sqlite_store(tmp: Path) -> str:
    return f"sqlite:///{tmp / 'mlflow.db'}"


def scores(results: dict) -> dict[str, float]:
    return {
        f"{task}/{key}": value
        for task, entry in results["results"].items()
        for key, value in entry.items()
        if "," in key and isinstance(value, float)
    }


def test_both_callbacks_log_scores_config_and_samples(
    toy_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.wandb_records import records

    store = sqlite_store(tmp_path)
    done = cli(
        run_args(
            toy_library,
            tmp_path,
            "hydra/callbacks=[wandb,mlflow]",
            "hydra.callbacks.wandb.mode=offline",
            "hydra.callbacks.wandb.project=toys",
            f"hydra.callbacks.mlflow.tracking_uri={store}",
            f"hydra.callbacks.mlflow.artifact_location={tmp_path / 'artifacts'}",
            "hydra.callbacks.mlflow.experiment=toys",
        ),
        env_extra={**SECRETS, "WANDB_SILENT": "true"},
    )
    assert done.returncode == 0, done.stderr
    run = tmp_path / "run"
    results = json.loads((run / "results.json").read_text())
    snapshot = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
    expected = scores(results)
    assert "toy_mc/acc,none" in expected and "toy_gen/exact_match,get-answer" in expected

    # W&B: one offline run under the run folder; its config, scores and artifact read back
    [run_file] = list((run / "wandb").glob("offline-run-*/run-*.wandb"))
    recs = list(records(run_file))
    [started] = [r.run for r in recs if r.WhichOneof("record_type") == "run"]
    config = {u.key: json.loads(u.value_json) for u in started.config.update if u.key != "_wandb"}
    assert config == snapshot and started.project == "toys"
    summary = {
        u.key or "/".join(u.nested_key): json.loads(u.value_json)
        for r in recs
        if r.WhichOneof("record_type") == "summary"
        for u in r.summary.update
    }
    assert {k: summary[k] for k in expected} == pytest.approx(expected)
    [artifact] = [
        r.artifact for r in recs if r.WhichOneof("record_type") == "artifact" and r.artifact.type == "eval_results"
    ]
    assert {c.path for c in artifact.manifest.contents} == {
        "results.json",
        "config.yaml",
        "samples/samples_toy_mc.jsonl",
        "samples/samples_toy_gen.jsonl",
    }

    # MLflow: the SQLite store read back through its client
    client = mlflow.tracking.MlflowClient(store)
    [logged] = client.search_runs([client.get_experiment_by_name("toys").experiment_id])
    assert logged.data.metrics == pytest.approx({k.replace(",", "/"): v for k, v in expected.items()})
    assert logged.data.params["task"] == json.dumps(["toy_mc", "toy_gen"]) and logged.data.params["limit"] == "6.0"
    paths = {a.path for a in client.list_artifacts(logged.info.run_id)}
    assert paths == {"config.yaml", "results.json", "samples"}
    local = Path(client.download_artifacts(logged.info.run_id, "config.yaml", str(tmp_path / "dl")))
    assert yaml.safe_load(local.read_text()) == snapshot
    assert {a.path for a in client.list_artifacts(logged.info.run_id, "samples")} == {
        "samples/samples_toy_mc.jsonl",
        "samples/samples_toy_gen.jsonl",
    }

    for path in [*tmp_path.rglob("*")]:
        if path.is_file():
            data = path.read_bytes()
            assert not any(secret.encode() in data for secret in SECRETS.values()), path


def test_a_tracking_uri_with_a_password_is_refused_before_anything_is_written(
    toy_library: Path, tmp_path: Path
) -> None:
    done = cli(
        run_args(
            toy_library,
            tmp_path,
            "hydra/callbacks=mlflow",
            "hydra.callbacks.mlflow.tracking_uri=https://me:secret@mlflow.example.com",
        )
    )
    assert done.returncode != 0
    assert "evalflow: error: hydra.callbacks.mlflow.tracking_uri contains a password" in done.stderr
    assert "MLFLOW_TRACKING_PASSWORD" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()


def test_each_sweep_job_is_one_mlflow_run(toy_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = sqlite_store(tmp_path)
    args = [a for a in run_args(toy_library, tmp_path) if not a.startswith("hydra.run.dir")]
    done = cli(
        args
        + [
            "hydra/callbacks=mlflow",
            f"hydra.callbacks.mlflow.tracking_uri={store}",
            f"hydra.callbacks.mlflow.artifact_location={tmp_path / 'artifacts'}",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
            "-m",
            "num_fewshot=0,1",
        ]
    )
    assert done.returncode == 0, done.stderr
    client = mlflow.tracking.MlflowClient(store)
    logged = client.search_runs([client.get_experiment_by_name("evalflow").experiment_id])
    assert sorted(r.data.params["num_fewshot"] for r in logged) == ["0", "1"]
    for job in ("0", "1"):
        results = json.loads((tmp_path / "sweep" / job / "results.json").read_text())
        [run] = [r for r in logged if r.data.params["num_fewshot"] == job]
        assert run.data.metrics["toy_mc/acc/none"] == pytest.approx(results["results"]["toy_mc"]["acc,none"])


def test_a_missing_client_or_driver_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from evalflow.errors import ConfigError
    from evalflow.tracking.mlflow_callback import MlflowCallback
    from evalflow.tracking.wandb_callback import WandbCallback

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in ("wandb", "sqlalchemy") else real(name, *a)
    )
    with pytest.raises(
        ConfigError, match=r"hydra/callbacks=wandb needs the 'wandb' package: pip install \"evalflow\[tracking\]\""
    ):
        WandbCallback(project="p")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(
        ConfigError, match=r"sqlite:///.*mlflow.db is a database.*sqlalchemy.*tracking_uri=http://HOST:5000"
    ):
        MlflowCallback()
