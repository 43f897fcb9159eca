"""Trackio: ``hydra/callbacks=trackio`` (conf/hydra/callbacks/trackio.yaml) logs each finished run
as one Trackio run, as lm-eval 0.4.13's ``TrackioLogger`` logs one (:mod:`evalflow.tracking.lmeval_trackio`):
the composed config with lm-eval's ``task_configs``/``cli_configs``, every numeric score as
``task/metric``, and each sample as a trace. Trackio keeps runs in ``TRACKIO_DIR`` (local, nothing
to log in to) unless ``space_id`` names a Hugging Face Space.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from evalflow.output.run_folder import finished_run
from evalflow.output.run_paths import RESULTS
from evalflow.tracking.lmeval_loggers import run_samples
from evalflow.tracking.lmeval_trackio import LmEvalTrackio
from evalflow.tracking.logged import partial_field, require
from evalflow.tracking.preflight import log_finished_job

log = logging.getLogger(__name__)


def log_to_trackio(
    folder: Path | str,
    *,
    project: str = "evalflow",
    name: str | None = None,
    group: str | None = None,
    space_id: str | None = None,
    log_samples: bool = True,
) -> bool:
    """Log the finished run in ``folder``; False when it did not finish (nothing logged)."""
    run = finished_run(folder)
    if run is None:
        log.warning("trackio: %s has no %s (the run did not finish); nothing logged", folder, RESULTS)
        return False
    args = {
        "project": project,
        "name": name,
        "group": group,
        "space_id": space_id,
        "config": {**run.config, **partial_field(run)},
    }
    logger = LmEvalTrackio({k: v for k, v in args.items() if v is not None})
    samples = run_samples(Path(folder), list(run.results.get("configs", {}))) if log_samples else None
    logger.log(run.results, samples)
    return True


class TrackioCallback(Callback):
    """Hydra callback: after each job (each sweep job too), log its run folder to Trackio."""

    def __init__(
        self,
        project: str = "evalflow",
        name: str | None = None,
        group: str | None = None,
        space_id: str | None = None,
        log_samples: bool = True,
    ) -> None:
        require("trackio", "hydra/callbacks=trackio")
        self.options: dict[str, Any] = dict(
            project=project, name=name, group=group, space_id=space_id, log_samples=log_samples
        )

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        log_finished_job("trackio", log_to_trackio, config, job_return, self.options)
