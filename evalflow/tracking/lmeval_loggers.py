"""The loggers an lm-eval command line asks for (``--wandb_args``, ``--wandb_config_args``,
``--trackio_args``, ``--hf_hub_log_args``), in lm-eval 0.4.13's order: opened before the evaluation
(W&B's and Trackio's runs start, the Hub arguments and token are checked), handed the results and
samples after it, the Hub push last, after lm-eval's files are written.

A logger that fails while logging ends the command with exit 1 and one paragraph
(:func:`evalflow.tracking.preflight.tracker_failed`), where lm-eval logs one line at info level and
exits 0: the run folder and cache are complete, so the same command again logs without a model call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalflow.lmeval_compat.translate import Translation
from evalflow.output.run_info import model_name
from evalflow.output.run_paths import samples_file
from evalflow.tracking.hub_push import hub_target, push_to_hub
from evalflow.tracking.preflight import tracker_failed


class LmEvalLoggers:
    """What ``tr.loggers`` asks for, opened now; :meth:`log` and :meth:`push` after the run."""

    def __init__(self, tr: Translation) -> None:
        self.tr = tr
        self.log_samples = "log_samples=true" in tr.overrides
        self.hub = (
            hub_target(tr.loggers["hf_hub_log_args"], self.log_samples) if "hf_hub_log_args" in tr.loggers else None
        )
        self.wandb: Any = None
        self.trackio: Any = None
        if "wandb_args" in tr.loggers:  # lm-eval reads --wandb_config_args only with --wandb_args
            from evalflow.tracking.lmeval_wandb import LmEvalWandb

            self.wandb = LmEvalWandb(tr.loggers["wandb_args"], tr.loggers.get("wandb_config_args"))
        if "trackio_args" in tr.loggers:
            from evalflow.tracking.lmeval_trackio import LmEvalTrackio

            self.trackio = LmEvalTrackio(tr.loggers["trackio_args"])

    def log(self, results: Mapping[str, Any], folder: Path) -> None:
        """W&B, then Trackio: the results, and the samples when the command logs them."""
        samples = run_samples(folder, list(results.get("configs", {}))) if self.log_samples else None
        for name, logger in (("wandb", self.wandb), ("trackio", self.trackio)):
            if logger is not None:
                try:
                    logger.log(results, samples)
                except Exception as exc:  # any client failure: one paragraph and exit 1, never a silent exit 0
                    tracker_failed(name, folder, exc, "the same command (its stages come from the cache)")

    def push(self, results: Mapping[str, Any], written: list[Path], folder: Path) -> None:
        """The Hub push of lm-eval's files (``written``: the results file first), once per task's
        samples as lm-eval pushes them."""
        if self.hub is None or not self.hub.pushes or not written:
            return
        tasks = list(results.get("configs", {})) if self.log_samples else []
        name = model_name({"type": self.tr.lm_model, **self.tr.lm_model_args})
        try:
            push_to_hub(self.hub, written[0], tasks, name)
        except Exception as exc:  # any Hub failure: one paragraph and exit 1
            tracker_failed("the Hugging Face Hub", folder, exc, "the same command (its stages come from the cache)")


def run_samples(folder: Path, tasks: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each task's samples rows from the run folder (tasks without a samples file left out)."""
    out = {}
    for task in tasks:
        path = samples_file(folder, task)
        if path.is_file():
            out[task] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return out
