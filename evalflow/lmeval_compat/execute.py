"""An lm-eval translation run: :func:`evalflow.evaluate` on the translated config (the same stages,
cache and run folder as the printed native command), for ``python -m evalflow lm-eval`` and
:func:`evalflow.simple_evaluate` alike.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from evalflow.lmeval_compat.translate import Translation


def run_folder() -> Path:
    """Where the native command line would put the run: outputs/<date>/<time>-<random suffix>."""
    return Path("outputs") / time.strftime("%Y-%m-%d") / f"{time.strftime('%H-%M-%S')}-{uuid.uuid4().hex[:6]}"


def execute(tr: Translation, folder: Path, model: Any = None) -> dict[str, Any]:
    """Run the translation (``--write_out`` first prints each task's first prompt, as lm-eval does)
    and return lm-eval's results dictionary: the model and its arguments as the command gave them;
    ``model``: a model object instead of the translation's preset (simple_evaluate)."""
    from evalflow.run.phases import evaluate

    if tr.verbosity:
        logging.getLogger("evalflow").setLevel(tr.verbosity.upper())
    if tr.delete_requests:
        delete_requests(tr)
    if tr.write_out:
        print_first_prompts(tr)
    results = evaluate(
        list(tr.tasks), tr.preset if model is None else model, output_dir=folder, overrides=list(tr.overrides)
    )
    if model is not None:
        return results
    from evalflow.output.results import as_command_gave

    return as_command_gave(results, tr.lm_model, tr.lm_model_args, tr.lm_config)  # lm-eval's names for what was given


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


def print_first_prompts(tr: Translation) -> None:
    """lm-eval's ``--write_out``: each task's first document as the model sees it (what ``show``
    prints), through the run's own stages and cache, before the run."""
    from evalflow.cache.store import CacheStore
    from evalflow.config.compose import compose_config
    from evalflow.config.settings import settings_from_config
    from evalflow.run.parts import select_tasks
    from evalflow.run.preview import prompt_outputs, write_task

    overrides = [
        o
        for o in tr.overrides
        if not o.startswith(("model.", "log_samples=", "batch_size=", "max_batch_size=", "predict_only="))
    ]
    overrides = ["model=dummy", f"task=[{','.join(tr.tasks)}]", *(o for o in overrides if not o.startswith("model="))]
    settings = settings_from_config(compose_config(overrides))
    if settings.limit is None and settings.samples is None:
        settings = dataclasses.replace(settings, limit=1.0)
    store = CacheStore(settings.cache_dir)
    try:
        for task in select_tasks(settings).tasks:
            write_task(task, prompt_outputs(task, settings, store), 1, sys.stdout, settings.code_sandbox)
    finally:
        store.close()
