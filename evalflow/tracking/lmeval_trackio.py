"""lm-eval's ``--trackio_args`` (``lm_eval/loggers/trackio_logger.py``): one Trackio run per command,
logged as lm-eval 0.4.13's ``TrackioLogger`` logs it: ``trackio.init(**trackio_args)`` (project
``lm-eval-harness`` unless given; ``step`` kept for every log call) before the evaluation; after it,
``task_configs`` and ``cli_configs`` in the run's config, every numeric score as ``task/metric``,
and with ``--log_samples`` each sample as a ``trackio.Trace`` under ``<task>/sample``.

Trackio keeps runs locally (``TRACKIO_DIR``) unless ``space_id`` names a Space;
``pip install trackio`` (or ``evalflow[tracking]``) installs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalflow.tracking.lmeval_tables import flat_scores, trace_parts
from evalflow.tracking.logged import require


class LmEvalTrackio:
    """The Trackio run of one lm-eval command: opened at construction, logged and finished by :meth:`log`."""

    def __init__(self, init_args: Mapping[str, Any]) -> None:
        require("trackio", "--trackio_args")
        import trackio

        args = dict(init_args)
        self.step = args.pop("step", None)
        args.setdefault("project", "lm-eval-harness")
        self.trackio = trackio
        self.run = trackio.init(**args)

    def log(self, results: Mapping[str, Any], samples: Mapping[str, list[dict[str, Any]]] | None) -> None:
        """lm-eval's ``post_init``, ``log_eval_result`` and (with samples) ``log_eval_samples``, then finish."""
        try:
            configs = dict(results.get("configs", {}))
            self.trackio.config.update({"task_configs": configs, "cli_configs": results.get("config", {})})
            scores = flat_scores(results)
            if scores:
                self.trackio.log(scores, step=self.step)
            groups = set(results.get("groups", {}))
            for task in results.get("results", {}):
                if task in groups or samples is None or task not in samples:
                    continue
                kind = (configs.get(task) or {}).get("output_type", "generate_until")
                for sample in samples[task]:
                    prompt, response, metadata = trace_parts(sample, task, kind)
                    trace = self.trackio.Trace(
                        messages=[{"role": "user", "content": prompt}, {"role": "assistant", "content": response}],
                        metadata=metadata,
                    )
                    self.trackio.log({f"{task}/sample": trace}, step=self.step)
        finally:
            self.trackio.finish()
