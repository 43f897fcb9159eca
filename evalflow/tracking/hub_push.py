"""lm-eval's ``--hf_hub_log_args`` (``lm_eval/loggers/evaluation_tracker.py``, ``EvaluationTracker``):
the results file and the samples folder that ``--output_path`` received, pushed to Hugging Face Hub
dataset repos with ``huggingface_hub.HfApi`` as lm-eval 0.4.13 pushes them, to the same repos
(``<org>/<details_repo_name>`` and ``<org>/<results_repo_name>``, ``-private`` unless
``public_repo``) and paths (``<model_name>/results_<date>.json``, ``<model_name_sanitized>/``).

The token is ``HF_TOKEN`` (or the ``token`` key, as lm-eval takes it); the arguments and the token are
checked before the evaluation (:func:`hub_target`). lm-eval then rebuilds the details repo's
dataset card (``recreate_metadata_card``); evalflow does not write that card.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalflow.errors import ConfigError
from evalflow.output.run_info import sanitize_model_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HubTarget:
    """lm-eval's ``EvaluationTracker`` arguments (its defaults), less ``output_path``."""

    hub_results_org: str = ""
    hub_repo_name: str = ""
    details_repo_name: str = ""
    results_repo_name: str = ""
    push_results_to_hub: bool = False
    push_samples_to_hub: bool = False
    public_repo: bool = False
    token: str = ""
    leaderboard_url: str = ""
    point_of_contact: str = ""
    gated: bool = False

    @property
    def pushes(self) -> bool:
        return self.push_results_to_hub or self.push_samples_to_hub

    def repos(self, org: str) -> tuple[str, str]:
        """(details repo, results repo) as lm-eval names them: ``hub_repo_name`` for both when given."""
        details = self.hub_repo_name or self.details_repo_name or "lm-eval-results"
        results = self.hub_repo_name or self.results_repo_name or details
        suffix = "" if self.public_repo else "-private"
        return f"{org}/{details}{suffix}", f"{org}/{results}{suffix}"


def hub_target(args: Mapping[str, Any], log_samples: bool) -> HubTarget:
    """The checked ``--hf_hub_log_args``; ``HF_TOKEN`` wins over a ``token`` key, as in lm-eval."""
    names = [f.name for f in dataclasses.fields(HubTarget)]
    unknown = [k for k in args if k not in names]
    if unknown:
        raise ConfigError(
            f"--hf_hub_log_args: {', '.join(unknown)} is not among the arguments of lm-eval's EvaluationTracker; "
            f"it takes {', '.join(names)}"
        )
    target = HubTarget(**{**dict(args), "token": os.environ.get("HF_TOKEN") or str(args.get("token") or "")})
    if target.pushes and not target.token:
        raise ConfigError(
            "--hf_hub_log_args asks to push to the Hugging Face Hub, but no token is set: set HF_TOKEN to a token "
            "with write access to the organisation (lm-eval reads the same variable), or drop push_results_to_hub "
            "and push_samples_to_hub."
        )
    if target.push_samples_to_hub and not log_samples:
        log.warning("Pushing samples to the Hub requires --log_samples to be set.")
    return target


def push_to_hub(
    target: HubTarget, results_file: Path, samples_tasks: list[str], model_name: str, api: Any = None
) -> None:
    """Push as lm-eval does after writing ``results_file`` (and, for each task in ``samples_tasks``,
    the samples folder beside it); ``api``: an ``HfApi`` (one is made from the token)."""
    if not target.pushes:
        return
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi(token=target.token)
    org = target.hub_results_org or api.whoami()["name"]
    details, results = target.repos(org)
    private = not target.public_repo
    if target.push_results_to_hub:
        api.create_repo(repo_id=results, repo_type="dataset", private=private, exist_ok=True)
        api.upload_file(
            repo_id=results,
            path_or_fileobj=str(results_file),
            path_in_repo=os.path.join(model_name, results_file.name),
            repo_type="dataset",
            commit_message=f"Adding aggregated results for {model_name}",
        )
        log.info("Successfully pushed aggregated results to the Hugging Face Hub. You can find them at: %s", results)
    for task in samples_tasks if target.push_samples_to_hub else ():
        api.create_repo(repo_id=details, repo_type="dataset", private=private, exist_ok=True)
        if target.gated:
            try:  # lm-eval's PUT of the repo's settings, which warns when it fails
                api.update_repo_settings(details, gated="auto", repo_type="dataset")
            except Exception as exc:  # the Hub's refusal, whatever its kind: the push goes on, as in lm-eval
                log.warning("Could not gate the repository: %r", exc)
        api.upload_folder(
            repo_id=details,
            folder_path=str(results_file.parent),
            path_in_repo=sanitize_model_name(model_name),
            repo_type="dataset",
            commit_message=f"Adding samples results for {task} to {model_name}",
        )
