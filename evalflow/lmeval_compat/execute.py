"""An lm-eval translation run: :func:`evalflow.evaluate` on the translated config (the same stages,
cache and run folder as the printed native command), for ``python -m evalflow lm-eval`` and
:func:`evalflow.simple_evaluate` alike.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from evalflow.lmeval_compat.before_run import (
    check_integrity,
    log_first_prompts,
    refuse_thinking_loglikelihood,
    selected_before_run,
    setup_logging,
)
from evalflow.lmeval_compat.translate import Translation


def run_folder() -> Path:
    """Where the native command line would put the run: outputs/<date>/<time>-<random suffix>."""
    return Path("outputs") / time.strftime("%Y-%m-%d") / f"{time.strftime('%H-%M-%S')}-{uuid.uuid4().hex[:6]}"


def execute(tr: Translation, folder: Path, model: Any = None) -> dict[str, Any]:
    """Run the translation and return lm-eval's results dictionary: the model and its arguments as
    the command gave them; ``model``: a model object instead of the translation's preset
    (simple_evaluate). First, before the model is built (lmeval_compat.before_run): ``enable_thinking``
    with a loglikelihood task is refused (lm-eval's model refuses it when asked for loglikelihoods),
    and, as lm-eval does, ``--check_integrity`` validates each task and ``--write_out`` logs each
    task's document 0. The secret model args go into this process's environment here, where the
    model and huggingface_hub read them (Ray workers inherit it), never into the config."""
    from evalflow.run.phases import evaluate

    os.environ.update(tr.environment)
    if tr.verbosity:
        logging.getLogger("evalflow").setLevel(tr.verbosity.upper())
        setup_logging(tr.verbosity)  # as lm-eval's simple_evaluate(verbosity=...) sets up its logging
    selection = selected_before_run(tr)  # once, for what runs before the run and for the run itself
    refuse_thinking_loglikelihood(tr, selection)
    if tr.check_integrity and selection is not None:
        check_integrity(tr, selection)
    if tr.delete_requests:
        delete_requests(tr)
    if tr.write_out and selection is not None:
        log_first_prompts(tr, selection)
    results = evaluate(
        list(tr.tasks),
        tr.preset if model is None else model,
        output_dir=folder,
        overrides=list(tr.overrides),
        selection=selection,
    )
    if model is not None:
        return results
    from evalflow.output.results import as_command_gave

    given = as_command_gave(results, tr.lm_model, tr.lm_model_args, tr.lm_config)  # lm-eval's names for what was given
    return {**given, "git_hash": working_folder_commit()} if "git_hash" in given else given


def working_folder_commit() -> str | None:
    """lm-eval's ``git_hash``: ``git describe --always`` run where the command runs (the user's
    project, not evalflow's checkout); None outside a git repository or without git."""
    try:
        done = subprocess.run(["git", "describe", "--always"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def delete_requests(tr: Translation) -> int:
    """lm-eval's ``--cache_requests delete``: every cached request (the instances stage's entries, of
    every task) deleted from the run's cache before it starts; documents, answers and scores stay.
    Returns how many entries went."""
    from evalflow.cache.store import CacheStore
    from evalflow.cache.upkeep import drop_stage
    from evalflow.config.compose import compose_config
    from evalflow.config.settings import settings_from_config

    cache = [o for o in tr.overrides if o.startswith("cache_dir=")]
    store = CacheStore(settings_from_config(compose_config(["model=dummy", *cache])).cache_dir)
    try:
        dropped = drop_stage(store, "instances")
    finally:
        store.close()
    print(f"evalflow lm-eval: --cache_requests delete: {dropped} cached requests entries deleted", file=sys.stderr)
    return dropped
