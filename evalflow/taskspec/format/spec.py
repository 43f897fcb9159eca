"""The task format: lm-eval 0.4.x's ``TaskConfig`` fields, their defaults and their meaning.

A :class:`TaskConfig` is the fully resolved task (``include`` chains merged, ``!function`` tags
turned into :class:`FunctionRef`). It is frozen and fingerprintable, so each stage of the DAG can
hash exactly the fields it reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evalflow.core.records import RequestType
from evalflow.errors import TaskError, closest

# Each output_type and the requests it sends (multiple_choice: a loglikelihood request per choice)
REQUEST_TYPE: Mapping[str, RequestType] = {
    "loglikelihood": "loglikelihood",
    "loglikelihood_rolling": "loglikelihood_rolling",
    "generate_until": "generate_until",
    "multiple_choice": "loglikelihood",
}
OUTPUT_TYPES = tuple(REQUEST_TYPE)


@dataclass(frozen=True)
class FunctionRef:
    """A ``!function module.attr`` reference, resolved lazily (indexing never imports task code).

    Its fingerprint is the attribute name plus a hash of the module's source, never its path, so a
    changed function changes the keys of the stages that call it; plus, for a module that runs in a
    side environment (:mod:`evalflow.taskspec.sidenv.envs`), that environment's name and pins.
    """

    module_path: str  # absolute path of the .py file
    attr: str  # dotted attribute inside that module
    source_hash: str

    def __fingerprint__(self) -> Any:
        from evalflow.taskspec.sidenv.envs import side_env_key  # reads the module's imports, memoized

        env = side_env_key(self.module_path, self.source_hash)
        return ("function", self.attr, self.source_hash) + ((env,) if env else ())

    def __str__(self) -> str:
        return f"!function {self.attr} ({self.module_path})"


@dataclass(frozen=True)
class TaskConfig:
    """One task, with lm-eval's field names and defaults."""

    task: str
    task_alias: str | None = None
    tag: tuple[str, ...] = ()
    dataset_path: str | None = None
    dataset_name: str | None = None
    dataset_kwargs: Mapping[str, Any] | None = None
    custom_dataset: Any = None
    training_split: str | None = None
    validation_split: str | None = None
    test_split: str | None = None
    fewshot_split: str | None = None
    process_docs: FunctionRef | None = None
    doc_to_text: Any = None
    doc_to_target: Any = None
    doc_to_choice: Any = None
    doc_to_image: Any = None
    doc_to_audio: Any = None
    process_results: FunctionRef | None = None
    use_prompt: str | None = None
    description: str = ""
    target_delimiter: str = " "
    fewshot_delimiter: str = "\n\n"
    fewshot_config: Mapping[str, Any] | None = None
    num_fewshot: int | None = None
    metric_list: tuple[Mapping[str, Any], ...] | None = None
    output_type: str = "generate_until"
    generation_kwargs: Mapping[str, Any] | None = None
    repeats: int = 1
    filter_list: tuple[Mapping[str, Any], ...] | None = None
    should_decontaminate: bool = False
    doc_to_decontamination_query: Any = None
    gen_prefix: str | None = None
    unsafe_code: bool = False
    metadata: Mapping[str, Any] | None = None
    # evalflow's extensions of the format (EVALFLOW_TASK_FIELDS): never in lm-eval's config dump
    cluster_key: str | None = None  # a document field or Jinja template: the document's cluster id
    # Where the task came from (file path, or "<python>"): for error messages only, never hashed.
    source: str = field(default="", compare=False)

    def where(self, key: str = "") -> str:
        """How an error names this task (and ``key``, e.g. ``metric_list[2]``): its file, or ``<python>``."""
        return f"{self.source or '<python>'}: task '{self.task}'" + (f" {key}" if key else "")

    @property
    def version(self) -> Any:
        return (self.metadata or {}).get("version")

    @property
    def eval_split(self) -> str:
        """The split that is evaluated: test, else validation (lm-eval's order)."""
        split = self.test_split or self.validation_split
        if not split:
            raise TaskError(
                f"task '{self.task}' ({self.source}) has neither test_split nor validation_split; "
                "set one of them to the split that should be evaluated"
            )
        return split

    def to_dict(self) -> dict[str, Any]:
        """The config as lm-eval prints it under ``configs`` in results.json."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "source" or f.name in EVALFLOW_TASK_FIELDS:
                continue
            value = getattr(self, f.name)
            if isinstance(value, FunctionRef):
                value = str(value)
            out[f.name] = value
        return out


EVALFLOW_TASK_FIELDS: tuple[str, ...] = ("cluster_key",)
"""The task keys evalflow adds to lm-eval's format, declared here and nowhere else. They are read
by evalflow's own stages and outputs only: lm-eval's ``configs`` dump (:meth:`TaskConfig.to_dict`)
leaves them out, so a task that sets one writes the results.json lm-eval would.

``cluster_key``: which documents share a passage, subject or source (docs/correlated-documents.md):
a document field's name, or a Jinja template rendered per document (as lm-eval's ``doc_to_*``
keys are); its value is the document's cluster id. compare's paired test and results.json's
``clustered_stderr`` then resample and sum over clusters instead of documents."""

TASK_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(TaskConfig) if f.name != "source")


def check_keys(raw: Mapping[str, Any], source: str, allowed: tuple[str, ...] = TASK_FIELDS) -> None:
    """Refuse unknown keys with the nearest valid one, as a typo would otherwise be ignored."""
    for key in raw:
        if key not in allowed:
            raise TaskError(
                f"{source}: unknown task key '{key}'; {closest(key, allowed)} Fix the key name, or remove it."
            )
