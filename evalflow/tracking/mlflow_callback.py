"""MLflow: ``hydra/callbacks=mlflow`` (conf/hydra/callbacks/mlflow.yaml) logs each finished run as
one MLflow run: the composed config as parameters (dotted keys) and as ``config.yaml``, every score
as a metric (``arc_easy/acc/none``: MLflow names cannot hold lm-eval's comma), and results.json
and the samples files as artifacts.

``tracking_uri`` null means MLflow's own default (``MLFLOW_TRACKING_URI``, else its local store).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from evalflow.errors import ConfigError
from evalflow.tracking.run_folder import flat_params, metric_values, read_run, refuse_credentials, require

log = logging.getLogger(__name__)

MAX_PARAM_CHARS = 6000  # MLflow's limit on a parameter value


def log_to_mlflow(
    folder: Path, *, tracking_uri: str | None = None, experiment: str = "evalflow", run_name: str | None = None,
    tags: Mapping[str, str] | None = None, log_samples: bool = True,
) -> str | None:
    """Log the finished run in ``folder``; returns the MLflow run id (None if it did not finish)."""
    refuse_credentials(tracking_uri, "hydra.callbacks.mlflow.tracking_uri")
    run = read_run(folder)
    if run is None:
        log.warning("mlflow: %s has no results.json (the run did not finish); nothing logged", folder)
        return None
    import mlflow

    if tracking_uri:
        mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_experiment(experiment)
    with mlflow.start_run(run_name=run_name, tags=dict(tags or {})) as active:
        params = {k: v[:MAX_PARAM_CHARS] for k, v in flat_params(run.config).items()}
        mlflow.log_params(params)
        mlflow.log_metrics({name.replace(",", "/"): value for name, value in metric_values(run.results).items()})
        mlflow.log_dict(dict(run.config), "config.yaml")
        mlflow.log_artifact(str(folder / "results.json"))
        for sample in run.samples if log_samples else ():
            mlflow.log_artifact(str(sample), artifact_path="samples")
        return str(active.info.run_id)


def _check_default_store(tracking_uri: str | None) -> None:
    """MLflow 3's default store is SQLite (``sqlite:///mlflow.db``), which needs SQLAlchemy: the
    full ``mlflow`` package has it, the ``mlflow-skinny`` client of evalflow's extra does not."""
    import importlib.util
    import os

    if tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or importlib.util.find_spec("sqlalchemy"):
        return
    raise ConfigError(
        "hydra/callbacks=mlflow without a tracking URI uses MLflow's default SQLite store, which needs the full "
        "mlflow package (pip install mlflow). Or point it at a server: hydra.callbacks.mlflow.tracking_uri=http://HOST:5000 "
        "(or set MLFLOW_TRACKING_URI)."
    )


class MlflowCallback(Callback):
    """Hydra callback: after each job (each sweep job too), log its run folder to MLflow."""

    def __init__(self, tracking_uri: str | None = None, experiment: str = "evalflow", run_name: str | None = None,
                 tags: Mapping[str, str] | None = None, log_samples: bool = True) -> None:
        require("mlflow", "hydra/callbacks=mlflow")
        refuse_credentials(tracking_uri, "hydra.callbacks.mlflow.tracking_uri")
        _check_default_store(tracking_uri)
        self.options: dict[str, Any] = dict(tracking_uri=tracking_uri, experiment=experiment, run_name=run_name,
                                            tags=dict(tags or {}), log_samples=log_samples)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if job_return.status != JobStatus.COMPLETED:
            return
        log_to_mlflow(Path(config.hydra.runtime.output_dir), **self.options)
