"""lm-eval's ``--wandb_args``/``--wandb_config_args`` (``lm_eval/loggers/wandb_logger.py``): one W&B run
per command, logged as lm-eval 0.4.13's ``WandbLogger`` logs it, so a project's dashboards keep their
keys: ``wandb.init(**wandb_args)`` (``step`` kept for every log call) before the evaluation, the config
args merged into the run's config; after it, ``task_configs`` and ``cli_configs`` in the config, the
scores with lm-eval's names (``arc_easy/acc``: a ``,none`` filter dropped; text values in the summary),
the ``evaluation/eval_results`` (and ``group_eval_results``) tables, a ``results`` artifact, and with
``--log_samples`` each task's ``<task>_eval_results`` table and ``<task>`` samples artifact.

    logger = LmEvalWandb({"project": "evals", "mode": "offline"}, {"team": "a"})   # before the run
    logger.log(results, samples)                                                   # after it
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from evalflow.output.run_paths import RESULTS
from evalflow.tracking.lmeval_tables import results_table_rows, sample_columns, summary_and_scores
from evalflow.tracking.logged import require
from evalflow.tracking.preflight import check_wandb_login

TABLE_COLUMNS = ["Version", "Filter", "num_fewshot", "Metric", "Value", "Stderr"]


class LmEvalWandb:
    """The W&B run of one lm-eval command: opened at construction (before the evaluation, as lm-eval
    opens it), logged and finished by :meth:`log`."""

    def __init__(self, init_args: Mapping[str, Any], config_args: Mapping[str, Any] | None = None) -> None:
        require("wandb", "--wandb_args")
        args = dict(init_args)
        check_wandb_login(args.get("mode"))
        import wandb

        self.step = args.pop("step", None)
        self.run = wandb.run if wandb.run is not None else wandb.init(**args)
        if config_args and wandb.run is self.run:
            self.run.config.update(dict(config_args))

    def log(self, results: Mapping[str, Any], samples: Mapping[str, list[dict[str, Any]]] | None) -> None:
        """lm-eval's ``post_init``, ``log_eval_result`` and (with samples) ``log_eval_samples``, then finish."""
        import wandb

        try:
            configs = dict(results.get("configs", {}))
            self.run.config.update(
                {"task_configs": configs, "cli_configs": results.get("config", {})},
                allow_val_change=self.step is not None,
            )
            text, scores = summary_and_scores(results)
            self.run.summary.update(text)
            self.run.log(scores, step=self.step)
            for key, first in (("results", "Tasks"), ("groups", "Groups")):
                if key == "results" or key in results:
                    table = wandb.Table(columns=[first, *TABLE_COLUMNS], data=results_table_rows(results, key))
                    name = "eval_results" if key == "results" else "group_eval_results"
                    self.run.log({f"evaluation/{name}": table}, step=self.step)
            self._artifact("results", "eval_results", RESULTS, results)  # lm-eval's file name, as the run folder's
            if samples is not None:
                self._log_samples(results, configs, samples)
        finally:
            self.run.finish()

    def _artifact(self, name: str, kind: str, file_name: str, data: Any) -> None:
        import wandb

        artifact = wandb.Artifact(name, type=kind)
        with artifact.new_file(file_name, mode="w", encoding="utf-8") as f:
            f.write(json.dumps(data, indent=2, default=str, ensure_ascii=False))
        self.run.log_artifact(artifact)

    def _log_samples(
        self, results: Mapping[str, Any], configs: Mapping[str, Any], samples: Mapping[str, list[dict[str, Any]]]
    ) -> None:
        """Each task's samples table (tasks of a group in one table per group, with ``group`` and
        ``task`` columns) and its samples as a JSON artifact, as lm-eval's ``log_eval_samples``."""
        import pandas as pd

        groups = set(results.get("groups", {}))
        by_group: dict[str, list[str]] = {}
        for task in [t for t in results.get("results", {}) if t not in groups and t in samples]:
            named = configs.get(task, {}).get("group")
            for group in [named] if isinstance(named, str) else named or []:
                by_group.setdefault(group, []).append(task)
            if not named:
                frame = pd.DataFrame(sample_columns(samples[task], configs[task]))
                self.run.log({f"{task}_eval_results": frame}, step=self.step)
            self._artifact(task, "samples_by_task", f"{task}_eval_samples.json", samples[task])
        for group, tasks in by_group.items():
            frames = [pd.DataFrame(sample_columns(samples[t], configs[t])).assign(group=group, task=t) for t in tasks]
            self.run.log({f"{group}_eval_results": pd.concat(frames, ignore_index=True)}, step=self.step)
