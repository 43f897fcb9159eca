"""MLflow: ``hydra/callbacks=mlflow`` (conf/hydra/callbacks/mlflow.yaml) logs each finished run as
one MLflow run: the composed config as parameters (dotted keys) and as ``config.yaml``, every score
as a metric (``arc_easy/acc/none``: MLflow names cannot hold lm-eval's comma), and results.json
and the samples files as artifacts.

``tracking_uri`` null means MLflow's own default (``MLFLOW_TRACKING_URI``, else MLflow 3's
``sqlite:///mlflow.db`` in the working folder). The store is checked when the callback is created,
before the evaluation (:mod:`evalflow.tracking.preflight`); a failure while logging exits 1.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from evalflow.output.run_folder import finished_run
from evalflow.output.run_paths import RESULTS, SNAPSHOT_CONFIG, results_file
from evalflow.tracking.logged import metric_values, refuse_credentials, require, tracker_params
from evalflow.tracking.preflight import check_mlflow_store, log_finished_job

log = logging.getLogger(__name__)

MAX_PARAM_CHARS = 6000  # MLflow's limit on a parameter value


def log_to_mlflow(
    folder: Path | str,
    *,
    tracking_uri: str | None = None,
    experiment: str = "evalflow",
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
    log_samples: bool = True,
    artifact_location: str | None = None,
) -> str | None:
    """Log the finished run in ``folder``; returns the MLflow run id (None if it did not finish).

    ``artifact_location`` is where a new experiment keeps its artifacts (MLflow's default for a
    database store is ``./mlruns`` in the working folder); an existing experiment keeps its own.
    """
    refuse_credentials(tracking_uri, "hydra.callbacks.mlflow.tracking_uri")
    run = finished_run(folder)
    folder = Path(folder)
    if run is None:
        log.warning("mlflow: %s has no %s (the run did not finish); nothing logged", folder, RESULTS)
        return None
    import mlflow

    previous = mlflow.get_tracking_uri()
    if tracking_uri:
        mlflow.set_tracking_uri(tracking_uri)
    try:
        return _log_run(mlflow, run, folder, experiment, run_name, tags, log_samples, artifact_location)
    finally:  # the caller's process keeps the store it had (a script logging several folders, a test suite)
        mlflow.set_tracking_uri(previous)


def _log_run(
    mlflow: Any,
    run: Any,
    folder: Path,
    experiment: str,
    run_name: str | None,
    tags: Mapping[str, str] | None,
    log_samples: bool,
    artifact_location: str | None,
) -> str:
    if artifact_location and mlflow.get_experiment_by_name(experiment) is None:
        mlflow.create_experiment(experiment, artifact_location=Path(artifact_location).resolve().as_uri())
    mlflow.set_experiment(experiment)
    with mlflow.start_run(run_name=run_name, tags=dict(tags or {})) as active:
        params = {k: v[:MAX_PARAM_CHARS] for k, v in tracker_params(run).items()}
        mlflow.log_params(params)
        mlflow.log_metrics({name.replace(",", "/"): value for name, value in metric_values(run.results).items()})
        mlflow.log_dict(dict(run.config), SNAPSHOT_CONFIG)
        mlflow.log_artifact(str(results_file(folder)))
        for sample in run.samples if log_samples else ():
            mlflow.log_artifact(str(sample), artifact_path="samples")
        return str(active.info.run_id)


class MlflowCallback(Callback):
    """Hydra callback: after each job (each sweep job too), log its run folder to MLflow."""

    def __init__(
        self,
        tracking_uri: str | None = None,
        experiment: str = "evalflow",
        run_name: str | None = None,
        tags: Mapping[str, str] | None = None,
        log_samples: bool = True,
        artifact_location: str | None = None,
    ) -> None:
        require("mlflow", "hydra/callbacks=mlflow")
        refuse_credentials(tracking_uri, "hydra.callbacks.mlflow.tracking_uri")
        check_mlflow_store(tracking_uri)
        self.options: dict[str, Any] = dict(
            tracking_uri=tracking_uri,
            experiment=experiment,
            run_name=run_name,
            tags=dict(tags or {}),
            log_samples=log_samples,
            artifact_location=artifact_location,
        )

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        log_finished_job("mlflow", log_to_mlflow, config, job_return, self.options)
