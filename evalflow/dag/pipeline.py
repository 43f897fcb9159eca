"""The evaluation DAG in one place: each stage, what it reads, and what it is keyed by.

    load_docs ─► fewshot ─► instances ─► inference ─► filters ─► metrics ─► aggregate
        └──────────┴────────────┴──────────────────────┴──────────┘ (documents feed every stage)
                                   tasks with judge metrics: filters ─► judge_requests ─►
                                   judge_inference ─► metrics (the judge's answers, parsed there)

Reading a node tells you when its cached result is reused: a change to anything *not* listed
leaves it a hit. Code is part of every key without being listed: each stage's own code (the
evalflow modules it runs, :func:`evalflow.dag.node.stage_code`), and, for the scoring stages, the
registered metrics, aggregations and filters they call (``components``, by a hash of their
source). Excluded on purpose from every key: ``batch_size`` and worker counts (they change
speed, not answers), the run folder and cache folder, data file paths (the data's bytes are hashed
instead), and the model's device (numerically equivalent for scoring purposes).

After the stages, :data:`OUTPUTS`: what the run folder's writers read (a task's summary, its samples
text), nodes keyed the same way, computed when read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from evalflow.dag.node import Node
from evalflow.judges.judge_metrics import has_judges, judge_specs
from evalflow.sandbox.registry import sandbox_identity
from evalflow.scoring.code_exec import runs_code
from evalflow.scoring.components import aggregation_components, filter_components, metric_components
from evalflow.taskspec.data.docsets import data_identity
from evalflow.taskspec.format.spec import TaskConfig

# Fields that decide how a document is rendered into text: shared by the prompt-building stages.
_RENDERING = ("doc_to_text", "doc_to_target", "doc_to_choice", "target_delimiter", "output_type", "use_prompt")


def _mutual_info_only(task: TaskConfig) -> Any:
    """acc_mutual_info adds unconditional requests; nothing else in metric_list changes requests."""
    return tuple(m for m in task.metric_list or () if m.get("metric") == "acc_mutual_info")


def _reduces_repeats(task: TaskConfig) -> Any:
    """Whether the filters stage must also run each repeat alone: only when a metric asks for a
    reduction of several repeats. A marker, not the reductions themselves, so that switching one
    reduction for another re-runs no filter, while a task without reductions never runs its
    pipelines on single repeats (a custom filter may need all of them, and it costs k more calls)."""
    reduced = (
        isinstance(task.repeats, int) and task.repeats > 1 and any("reduction" in m for m in task.metric_list or ())
    )
    return ({"reduction": "per-sample answers"},) if reduced else ()


def _calls(components: Callable[[TaskConfig], Any]) -> Callable[[TaskConfig, Mapping[str, Any]], Any]:
    """The identity entry of the registered components a stage calls (they depend on the task only)."""
    return lambda task, settings: components(task)


def _sandbox(task: TaskConfig, settings: Mapping[str, Any]) -> Any:
    """The sandbox backend (name and code) of a task whose metrics run code; None for the others,
    so that choosing or editing a backend re-scores only the tasks it runs programs for."""
    return sandbox_identity(settings["code_sandbox"]) if runs_code(task) else None


def _judge_prompts(task: TaskConfig) -> Any:
    """What judge requests are built from: each judge's rubric text (a prompt_file's contents,
    never its path) and gen_kwargs; not its model, parser or policy (those key the later stages)."""
    return tuple(judge.request_part() for judge in judge_specs(task))


def _clustered(task: TaskConfig) -> bool:
    return task.cluster_key is not None


def _data_identity(task: TaskConfig, settings: Mapping[str, Any]) -> Any:
    return data_identity(task, settings["data_map"])


def _process_docs_rng(task: TaskConfig, settings: Mapping[str, Any]) -> Any:
    """The global seeds process_docs runs under, for a task whose documents pass through code
    (a YAML-only task's documents cannot depend on them)."""
    fewshot = task.fewshot_config if isinstance(task.fewshot_config, Mapping) else {}
    has_code = task.process_docs is not None or fewshot.get("process_docs") is not None
    return settings["task_rng"] if has_code else None


def _dataset_options(task: TaskConfig, settings: Mapping[str, Any]) -> Any:
    """dataset_kwargs other than the files (whose bytes _data_identity hashes)."""
    return {k: v for k, v in (task.dataset_kwargs or {}).items() if k != "data_files"}


PIPELINE: tuple[Node, ...] = (
    Node(
        "load_docs",
        "evalflow.stages.load_docs:load_docs",
        "docs",
        task_fields=(
            "dataset_path",
            "dataset_name",
            "dataset_kwargs",
            "custom_dataset",
            "training_split",
            "validation_split",
            "test_split",
            "fewshot_split",
            "fewshot_config",
            "process_docs",
            "metadata",  # custom_dataset(**metadata, **dataset_kwargs): keyed by what it returns
        ),
        run_settings=("data_map", "task_rng"),
        identity={"data": _data_identity, "dataset_options": _dataset_options, "task_rng": _process_docs_rng},
        unhashed=("dataset_path", "dataset_kwargs", "custom_dataset", "metadata", "data_map", "task_rng"),
        resources=("images",),  # image columns' pixels, stored by digest; the data's bytes key them
    ),
    Node(
        "fewshot",
        "evalflow.stages.fewshot:fewshot",
        "contexts",
        task_fields=_RENDERING
        + (
            "description",
            "fewshot_delimiter",
            "fewshot_config",
            "gen_prefix",
            "training_split",
            "validation_split",
            "test_split",
            "fewshot_split",
        ),
        run_settings=("num_fewshot", "fewshot_seed", "limit", "samples", "subset", "system_instruction", "chat"),
        upstream=("load_docs",),
    ),
    Node(
        "instances",
        "evalflow.stages.instances:instances",
        "instances",
        task_fields=_RENDERING
        + ("generation_kwargs", "repeats", "fewshot_delimiter", "gen_prefix", "doc_to_image", "doc_to_audio"),
        derive={"metric_list": _mutual_info_only},
        run_settings=("gen_kwargs", "seed", "apply_chat_template"),
        upstream=("load_docs", "fewshot"),
        resources=("images",),  # doc_to_image's results, stored by digest (requests carry the digests)
    ),
    Node(
        "inference",
        "evalflow.stages.inference:inference",
        "responses",
        run_settings=("model",),  # the model's identity, never its weights or device
        upstream=("instances",),
    ),
    Node(
        "filters",
        "evalflow.stages.filters:filters",
        "filtered",
        task_fields=("filter_list",),
        derive={"metric_list": _reduces_repeats},
        run_settings=("think_end_token",),
        identity={"components": _calls(filter_components)},
        upstream=("load_docs", "instances", "inference"),
    ),
    Node(
        "judge_requests",
        "evalflow.stages.judge_requests:judge_requests",
        "judge_requests",
        # the target and choices a judge prompt shows (rendered as the metrics stage renders them)
        task_fields=_RENDERING,
        derive={"metric_list": _judge_prompts},
        upstream=("load_docs", "filters"),
        applies=has_judges,
    ),
    Node(
        "judge_inference",
        "evalflow.stages.judge_inference:judge_inference",
        "judge_responses",
        run_settings=("judges",),  # per judge metric, its model's identity (as the scored model's)
        upstream=("judge_requests",),
        applies=has_judges,
    ),
    Node(
        "metrics",
        "evalflow.stages.metrics:metrics",
        "scores",
        task_fields=_RENDERING + ("metric_list", "process_results", "repeats"),  # repeats: pass@k's k
        run_settings=("code_sandbox", "task_rng"),
        identity={"components": _calls(metric_components), "sandbox": _sandbox},
        unhashed=("code_sandbox",),  # keyed by the "sandbox" entry, for the tasks that run code only
        upstream=("load_docs", "filters", "judge_requests", "judge_inference"),  # the judge stages: judge tasks only
    ),
    Node(
        "aggregate",
        "evalflow.stages.aggregate:aggregate",
        "result",
        task_fields=("metric_list", "output_type", "process_results", "repeats"),
        run_settings=("bootstrap_iters",),
        identity={"components": _calls(aggregation_components)},
        upstream=("metrics",),
    ),
)

STAGE_NAMES: tuple[str, ...] = tuple(node.name for node in PIPELINE)

ANSWERING: tuple[str, ...] = ("inference", "judge_inference")
"""The stages whose output is a model's answers (the scored model's, the judges'): ``recompute=answers``
computes them and every node downstream of them anew (:func:`evalflow.dag.runner.unread_nodes`)."""

REQUESTS: frozenset[str] = frozenset({"load_docs", "fewshot", "instances"})
"""lm-eval's request cache: the documents, their few-shot contexts and the requests built from them;
``recompute=requests`` (lm-eval's ``--cache_requests refresh``) computes them anew, and
``--cache_requests delete`` deletes the ``instances`` entries (:func:`evalflow.cache.upkeep.drop_stage`)."""

OUTPUTS: tuple[Node, ...] = (
    Node(
        "summary",
        "evalflow.output.summary:task_summary",
        "summary",
        upstream=("load_docs", "fewshot", "inference"),  # its sizes, few-shot split and data fingerprint
    ),
    Node(
        "samples",
        "evalflow.output.samples:samples_text",
        "samples",
        task_fields=("cluster_key",),  # each line's cluster id
        run_settings=("think_end_token",),  # a generation's thinking_unclosed stop reason
        upstream=("load_docs", "instances", "inference", "filters", "metrics"),
    ),
    Node(
        "generations",
        "evalflow.output.generations:generation_stats",
        "generations",
        # the score on finished generations is aggregated as the aggregate stage aggregates
        task_fields=("metric_list", "output_type", "process_results", "repeats"),
        run_settings=("think_end_token",),  # thinking_unclosed; never the truncation threshold
        identity={"components": _calls(aggregation_components)},
        upstream=("instances", "inference", "metrics", "aggregate"),
        # a local model's tokenizer, for the thinking parts' tokens: named by the model's identity,
        # which the inference key holds (output/thinking_tokens.py)
        resources=("count_tokens",),
    ),
    Node(
        "clusters",
        "evalflow.output.clusters:cluster_stats",
        "clusters",
        # the clustered stderr: of the metrics lm-eval gives a stderr (the aggregate's keys)
        task_fields=("cluster_key",),
        upstream=("load_docs", "metrics", "aggregate"),
        applies=_clustered,  # a task without cluster_key plans no node: nothing is decoded for it
    ),
)
"""What the run folder's writers read of a task, keyed as every stage is (its code and its upstream
keys) and cached beside the stages: a fully cached run then decodes none of the documents, prompts
and answers they are made of (on 5-shot mmlu, ~60 MB). Unlike a stage, an output node is computed
only when it is read (a run without ``log_samples`` never builds its samples text), is in no stage's
key and in no manifest line, and is planned only for a pipeline that has every node it reads."""
