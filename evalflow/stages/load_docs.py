"""Stage 1: the task's documents (evaluated split and few-shot split), as plain JSON rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import evalflow.cache.image_store  # noqa: F401 - its pixel hash makes the stage's image references: in its code key
from evalflow.core.records import DocSet
from evalflow.taskspec.data.docsets import load_docset
from evalflow.taskspec.format.spec import TaskConfig


def load_docs(task: TaskConfig, data_map: Mapping[str, Any] | None, images: Any = None) -> DocSet:
    return load_docset(task, data_map, images)
