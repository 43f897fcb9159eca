"""Stage 1: the task's documents (evaluated split and few-shot split), as plain JSON rows; a task's
``process_docs`` code runs under the global RNGs lm-eval's seeds give it (``task_rng``:
taskspec.format.lmeval_seeds), so code that draws from ``random`` gives the same documents each run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import evalflow.cache.image_store  # noqa: F401 - its pixel hash makes the stage's image references: in its code key
from evalflow.core.records import DocSet
from evalflow.taskspec.data.docsets import load_docset
from evalflow.taskspec.format.lmeval_seeds import scoring_rng
from evalflow.taskspec.format.spec import TaskConfig
from evalflow.taskspec.format.taskcode import rng_effects


def load_docs(
    task: TaskConfig, data_map: Mapping[str, Any] | None, task_rng: Mapping[str, int], images: Any = None
) -> DocSet:
    with scoring_rng(rng_effects(task), task_rng):
        return load_docset(task, data_map, images)
