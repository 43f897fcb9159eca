"""A requested tracker that cannot log never passes silently (issue 20, item 2): what can be
checked is refused before the evaluation starts (exit 2, no model call, no run folder), and a
failure while logging ends the run with exit 1 and one paragraph, the run folder complete. No
MLflow opt-in variable is set by these tests, as a user would not have one."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from tests.support.cli import cli
from tests.support.mlflow_double import ReadOnlyMlflow
from tests.support.tracked_runs import run_args

pytest.importorskip("mlflow", reason="the tracking extra is not installed: pip install 'evalflow[tracking]'")
pytest.importorskip("wandb", reason="the tracking extra is not installed: pip install 'evalflow[tracking]'")


@pytest.fixture(autouse=True)
def as_a_user(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No opt-in, no tracker credentials, no netrc: the environment of a user who set none."""
    for name in ("MLFLOW_ALLOW_FILE_STORE", "MLFLOW_TRACKING_URI", "WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))


def calls(log: Path) -> int:
    return sum(int(line) for line in log.read_text().split()) if log.is_file() else 0


def refused_before_evaluation(done, tmp_path: Path, log: Path) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("evalflow: error:") == 1 and "Traceback" not in done.stderr
    assert calls(log) == 0 and not (tmp_path / "run" / "results.json").exists()
    return done.stderr


def test_mlflow_file_store_is_refused_up_front_with_the_fix(toy_library: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    done = cli(
        run_args(toy_library, tmp_path, "hydra/callbacks=mlflow"),
        env_extra={"MLFLOW_TRACKING_URI": f"file:{tmp_path / 'mlruns'}", "EVALFLOW_TEST_CALL_LOG": str(log)},
    )
    err = refused_before_evaluation(done, tmp_path, log)
    assert "is MLflow's file store" in err and "MLFLOW_ALLOW_FILE_STORE=true" in err and "sqlite:///" in err


def test_an_mlflow_server_that_does_not_answer_is_refused_up_front(toy_library: Path, tmp_path: Path) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]  # closed again before the run: nothing listens there
    log = tmp_path / "calls.log"
    done = cli(
        run_args(
            toy_library,
            tmp_path,
            "hydra/callbacks=mlflow",
            f"hydra.callbacks.mlflow.tracking_uri=http://127.0.0.1:{port}",
        ),
        env_extra={"EVALFLOW_TEST_CALL_LOG": str(log)},
    )
    err = refused_before_evaluation(done, tmp_path, log)
    assert f"the tracking store http://127.0.0.1:{port} cannot be used" in err


def test_wandb_online_without_a_key_is_refused_up_front(toy_library: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    done = cli(run_args(toy_library, tmp_path, "hydra/callbacks=wandb"), env_extra={"EVALFLOW_TEST_CALL_LOG": str(log)})
    err = refused_before_evaluation(done, tmp_path, log)
    assert "needs a W&B API key" in err and "wandb login" in err and "mode=offline" in err


def test_a_tracker_failing_while_logging_exits_1_and_the_run_folder_is_complete(
    toy_library: Path, tmp_path: Path
) -> None:
    log = tmp_path / "calls.log"
    with ReadOnlyMlflow() as server:
        done = cli(
            run_args(
                toy_library, tmp_path, "hydra/callbacks=mlflow", f"hydra.callbacks.mlflow.tracking_uri={server.url}"
            ),
            env_extra={"EVALFLOW_TEST_CALL_LOG": str(log), "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"},
        )
    assert done.returncode == 1, done.stdout + done.stderr
    assert any(p.startswith("/api/2.0/mlflow/experiments/search") for p in server.requests)  # the store check ran
    [paragraph] = [line for line in done.stderr.splitlines() if line.startswith("evalflow: error:")]
    assert paragraph.startswith(f"evalflow: error: mlflow could not log the finished run in {tmp_path / 'run'}")
    assert (
        "this token may not write" in paragraph and "log_to_mlflow(" in paragraph and "UserWarning" not in done.stderr
    )
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert "toy_mc" in results["results"] and calls(log) > 0  # the evaluation ran and its folder is whole
    assert os.path.isfile(tmp_path / "run" / "manifest.json")


def test_logging_later_takes_the_folder_as_text(toy_library: Path, tmp_path: Path) -> None:
    """The paragraph's `log_to_mlflow('...')` call, as a user pastes it: the folder as a string."""
    from evalflow.tracking.mlflow_callback import log_to_mlflow

    done = cli(run_args(toy_library, tmp_path))
    assert done.returncode == 0, done.stderr
    run_id = log_to_mlflow(
        str(tmp_path / "run"),
        tracking_uri=f"sqlite:///{tmp_path / 'later.db'}",
        artifact_location=str(tmp_path / "artifacts"),
    )
    assert run_id
