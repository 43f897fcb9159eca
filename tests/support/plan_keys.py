"""One task and its run's stage settings, to plan keys from without running anything (the key tests
change one input at a time against these)."""

from __future__ import annotations

from typing import Any

from evalflow.config.settings import settings_from_config
from evalflow.run.phases import task_settings
from evalflow.taskspec.format.spec import TaskConfig

BASE_TASK = TaskConfig(
    task="t",
    dataset_path="json",
    dataset_kwargs={"data_files": {"test": "/nonexistent/test.jsonl"}},
    test_split="test",
    training_split="train",
    output_type="multiple_choice",
    doc_to_text="Q: {{q}}",
    doc_to_target="label",
    doc_to_choice="{{choices}}",
    metric_list=({"metric": "acc"},),
)


# the stage settings of a run with the schema's defaults, as evalflow.run.phases.task_settings derives them
BASE_SETTINGS: dict[str, Any] = task_settings(
    BASE_TASK, settings_from_config({"task": "t", "bootstrap_iters": 1000, "data_map": {}}), "model-a"
)


STAGES = ["load_docs", "fewshot", "instances", "inference", "filters", "metrics", "aggregate"]
