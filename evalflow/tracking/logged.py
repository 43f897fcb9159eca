"""What a tracker logs of a finished run (pure: no tracking client involved); the run is read by
:func:`evalflow.output.run_folder.finished_run`.

    run = finished_run(Path("outputs/2025-01-01/12-00-00"))
    metric_values(run.results)   # {"arc_easy/acc,none": 0.61, "arc_easy/acc_stderr,none": 0.02, ...}
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from evalflow.errors import ConfigError
from evalflow.output.partial import partial_line
from evalflow.output.run_folder import Run
from evalflow.output.run_paths import SNAPSHOT


def tracker_params(run: Run) -> dict[str, str]:
    """The flat parameters a tracker logs: the config's dotted keys plus ``model_name``, so a run of a
    model object (whose snapshot can only record its class and identity) is logged under its name,
    and, for a partial run, ``partial`` (``partial: arc_easy 128 of 2376``)."""
    return {**flat_params(run.config), "model_name": run.model_name, **partial_field(run)}


def partial_field(run: Run) -> dict[str, str]:
    """``{"partial": "partial: arc_easy 128 of 2376"}`` for a partial (gate) run, else nothing: a
    tracker's config and summary say so, and W&B tags it (:func:`partial_tags`)."""
    line = partial_line(run.results)
    return {"partial": line} if line else {}


def partial_tags(run: Run) -> list[str]:
    return ["partial"] if partial_line(run.results) else []


def metric_values(results: Mapping[str, Any]) -> dict[str, float]:
    """Every numeric score of every task and group, named ``<task>/<metric>,<filter>`` (lm-eval's
    W&B names); stderrs of "N/A" and non-finite values are left out."""
    out: dict[str, float] = {}
    for task, entry in results.get("results", {}).items():
        for key, value in entry.items():
            if "," in key and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out[f"{task}/{key}"] = float(value)
    return out


def flat_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """The config as dotted keys and text values (``model.dtype: float32``), for trackers whose
    parameters are flat strings."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flat_params(value, name + "."))
        else:
            out[name] = json.dumps(value) if not isinstance(value, str) else value
    return out


def results_rows(results: Mapping[str, Any]) -> list[list[Any]]:
    """lm-eval's W&B results table: Task, Version, Filter, num_fewshot, Metric, Value, Stderr."""
    rows = []
    for task, entry in results.get("results", {}).items():
        for key, value in entry.items():
            if "," not in key or "_stderr," in key or not isinstance(value, (int, float)):
                continue
            metric, _, filter_name = key.partition(",")
            stderr = entry.get(f"{metric}_stderr,{filter_name}")
            rows.append(
                [
                    task,
                    str(results.get("versions", {}).get(task)),
                    filter_name,
                    results.get("n-shot", {}).get(task),
                    metric,
                    value,
                    stderr if isinstance(stderr, (int, float)) else None,
                ]
            )
    return rows


def refuse_credentials(uri: str | None, setting: str) -> None:
    """A URI with a password would be saved in the run folder's .hydra/ snapshot: refuse it."""
    if uri and urlsplit(uri).password:
        raise ConfigError(
            f"{setting} contains a password; settings are saved in every run folder's {SNAPSHOT}/ snapshot. "
            "Remove it from the URI and give credentials through the environment "
            "(MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, or MLFLOW_TRACKING_TOKEN)."
        )


def require(module: str, what: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"{what} needs the '{module}' package: pip install \"evalflow[tracking]\"")
