"""Weights & Biases: ``hydra/callbacks=wandb`` (conf/hydra/callbacks/wandb.yaml) logs each finished
run as one W&B run: the composed config, every score (lm-eval's names, ``arc_easy/acc,none``), the
results table, and an artifact with results.json, the config snapshot and the samples files.

Offline (``hydra.callbacks.wandb.mode=offline`` or ``WANDB_MODE=offline``) the run is written
under the run folder's ``wandb/`` for a later ``wandb sync``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from hydra.core.utils import JobReturn
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from evalflow.output.run_folder import finished_run
from evalflow.output.run_paths import RESULTS, SNAPSHOT_CONFIG, results_file
from evalflow.tracking.logged import metric_values, partial_field, partial_tags, require, results_rows
from evalflow.tracking.preflight import check_wandb_login, log_finished_job

log = logging.getLogger(__name__)

WandbMode = Literal["online", "offline", "disabled", "shared"]  # wandb.init's modes
TABLE_COLUMNS: list[str | int] = ["Task", "Version", "Filter", "num_fewshot", "Metric", "Value", "Stderr"]


def log_to_wandb(
    folder: Path | str,
    *,
    project: str | None = None,
    entity: str | None = None,
    name: str | None = None,
    group: str | None = None,
    job_type: str = "eval",
    tags: Sequence[str] = (),
    mode: WandbMode | None = None,
    log_samples: bool = True,
) -> str | None:
    """Log the finished run in ``folder``; returns the W&B run id (None if the run did not finish)."""
    run = finished_run(folder)
    folder = Path(folder)
    if run is None:
        log.warning("wandb: %s has no %s (the run did not finish); nothing logged", folder, RESULTS)
        return None
    import wandb

    wb = wandb.init(
        project=project,
        entity=entity,
        name=name,
        group=group,
        job_type=job_type,
        tags=[*tags, *partial_tags(run)] or None,
        mode=mode,
        dir=str(folder),
        config={**run.config, **partial_field(run)},
    )
    try:
        metrics = metric_values(run.results)
        wb.log(metrics)
        wb.summary.update({**metrics, "model_name": run.model_name, **partial_field(run)})
        wb.log({"evaluation/eval_results": wandb.Table(columns=TABLE_COLUMNS, data=results_rows(run.results))})
        artifact = wandb.Artifact(f"run-{wb.id}-results", type="eval_results")
        artifact.add_file(str(results_file(folder)))
        if run.config_file is not None:
            artifact.add_file(str(run.config_file), name=SNAPSHOT_CONFIG)
        for sample in run.samples if log_samples else ():
            artifact.add_file(str(sample), name=f"samples/{sample.name}")
        wb.log_artifact(artifact)
        return str(wb.id)
    finally:
        wb.finish()


class WandbCallback(Callback):
    """Hydra callback: after each job (each sweep job too), log its run folder to W&B."""

    def __init__(
        self,
        project: str | None = None,
        entity: str | None = None,
        name: str | None = None,
        group: str | None = None,
        job_type: str = "eval",
        tags: Sequence[str] = (),
        mode: WandbMode | None = None,
        log_samples: bool = True,
    ) -> None:
        require("wandb", "hydra/callbacks=wandb")
        check_wandb_login(mode)
        self.options: dict[str, Any] = dict(
            project=project,
            entity=entity,
            name=name,
            group=group,
            job_type=job_type,
            tags=tuple(tags or ()),
            mode=mode,
            log_samples=log_samples,
        )

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        log_finished_job("wandb", log_to_wandb, config, job_return, self.options)
