"""lm-eval 0.4.13's results layout, built from the stage outputs of a run: every field of
lm-eval's results dictionary is named here, the ones ``evalflow lm-eval`` and
``evalflow.simple_evaluate`` rewrite as the command gave them (:func:`as_command_gave`) and
``task_hashes`` (:func:`with_task_hashes`) included; the modules beside it compute values.

    {"results": {task: {"name": ..., "alias": ..., "sample_len": 50, "acc,none": 0.5, "acc_stderr,none": 0.05}},
     "groups": {...}, "group_subtasks": {...}, "configs": {...}, "versions": {...},
     "n-shot": {...}, "higher_is_better": {...}, "n-samples": {...},
     "config": {"model": "hf", "model_args": {...}, ...}, "git_hash": ..., "date": ...,
     "transformers_version": ..., "model_source": ..., "model_name": ..., ...,
     "total_evaluation_time_seconds": "12.3", "evalflow": {...}}

Groups are in ``versions``, ``higher_is_better`` and ``n-shot`` as lm-eval puts them, and their
entries carry ``sample_len`` and ``sample_count``; ``groups`` holds the groups that aggregate and is
left out when none does, as lm-eval leaves it. What only evalflow records lives under the
``evalflow`` key, so a tool reading lm-eval's keys finds exactly lm-eval's meaning there.
``lm_eval_version`` names the lm-eval whose semantics evalflow follows (``evalflow_version`` is
evalflow's own); the tokenizer and model fields lm-eval writes for ``hf`` models (``max_length``,
``tokenizer_*_token``, ``config.model_dtype``, ...) come from evalflow.output.model_info.
``pretty_env_info`` and ``upper_git_hash`` are lm-eval's (output/environment.py); ``task_hashes``,
which lm-eval's tracker adds to its own results file, is in the file ``python -m evalflow lm-eval
--output_path`` writes (lmeval_compat/layout.py).
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalflow.config.schema import RunSettings
from evalflow.dag.runner import StageEvent, StageOutputs
from evalflow.output.clusters import results_entry
from evalflow.output.cost import run_cost, run_tokens
from evalflow.output.environment import environment_fields
from evalflow.output.partial import PARTIAL, partial_marker
from evalflow.output.run_info import (
    chat_template,
    git_hash,
    hash_string,
    model_name,
    sanitize_model_name,
    version,
)
from evalflow.output.summary import TaskSummary
from evalflow.scale.answer_cache import InferenceCounts
from evalflow.taskspec.catalog.index import Selection
from evalflow.taskspec.prompts.fewshot_context import effective_num_fewshot
from evalflow.taskspec.prompts.samplers import FEWSHOT_CONFIG_KEYS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunRecord:
    """Everything a finished run produced, for the writers."""

    settings: RunSettings
    selection: Selection
    outputs: Mapping[str, StageOutputs]  # task -> stage (and output node) -> output
    events: list[StageEvent]
    inference: InferenceCounts
    started: float
    finished: float
    model_identity: Any = None  # plain data the model's cache identity is a hash of
    model: Mapping[str, Any] | None = (
        None  # the model that answered (run_info.object_model for objects); None: settings.model
    )
    judge: InferenceCounts | None = None  # the judge models' requests (tasks with judge metrics); None: no judge
    judge_identities: Mapping[str, Any] = field(default_factory=dict)  # judge identity key -> its plain data
    summaries: Mapping[str, TaskSummary] = field(default_factory=dict)  # task -> its summary (else read off outputs)

    def summary(self, task: str) -> TaskSummary:
        """The task's document counts, few-shot split and data fingerprint (output/summary.py)."""
        found = self.summaries.get(task)
        return found if found is not None else TaskSummary.of(self.outputs[task])


def build_results(record: RunRecord, store: Any = None) -> dict[str, Any]:
    """The run's results.json, in lm-eval 0.4.13's layout and key order (its tools read it);
    ``store``: the run's cache, where the model's tokenizer fields are kept (lmeval_compat.model_info)."""
    from evalflow.output.model_info import LM_EVAL_VERSION, lm_eval_fields

    s = record.settings
    results: dict[str, Any] = {}
    configs, versions, n_shot, hib, n_samples = {}, {}, {}, {}, {}
    for task in record.selection.tasks:
        out = record.outputs[task.task]
        summary = record.summary(task.task)
        result = out["aggregate"]
        results[task.task] = {
            "name": task.task,
            "alias": task.task_alias or task.task,
            "sample_len": summary.evaluated,
            **dict(result.metrics),
        }
        n_shot[task.task] = effective_num_fewshot(task, s.num_fewshot)  # lm-eval's rule, as the run used
        configs[task.task] = lmeval_task_config(task, n_shot[task.task], s.gen_kwargs)
        versions[task.task] = task.version
        hib[task.task] = dict(result.higher_is_better)
        n_samples[task.task] = {"original": summary.docs, "effective": summary.evaluated}
    groups = _group_results(record, results, n_samples)
    for group in record.selection.groups:
        versions[group.name] = str((group.metadata or {}).get("version", "N/A"))
    _propagate(record, n_shot, hib)
    model = dict(s.model if record.model is None else record.model)
    tokenizer_fields, model_fields = lm_eval_fields(model, record.model_identity, store)
    environment = environment_fields()
    aggregated = {name: groups[name] for name in groups if _aggregates(record, name)}
    return {
        "results": {**results, **groups},
        **({"groups": aggregated} if aggregated else {}),  # lm-eval: the groups that aggregate, if any
        "group_subtasks": {g.name: list(g.members) for g in record.selection.groups},
        "configs": configs,
        "versions": versions,
        "n-shot": n_shot,
        "higher_is_better": hib,
        "n-samples": n_samples,
        "config": _config(s, model, model_fields, ran_device(record.inference.model, model)),
        "git_hash": git_hash(),
        "date": record.started,
        "pretty_env_info": environment["pretty_env_info"],
        "transformers_version": version("transformers"),
        "lm_eval_version": LM_EVAL_VERSION,
        "upper_git_hash": environment["upper_git_hash"],
        **tokenizer_fields,
        **_run_fields(s, model),
        "total_evaluation_time_seconds": str(round(record.finished - record.started, 3)),
        # beside lm-eval's keys: how each task's generations ended and what they cost (output/generations.py)
        **({"generations": stats} if (stats := task_generations(record)) else {}),
        # beside lm-eval's stderr, which stays as it is: the tasks with a cluster_key (output/clusters.py)
        **({"clustered_stderr": clustered} if (clustered := task_clusters(record)) else {}),
        **tokens_and_cost(record),  # the run's tokens, computed and cached, and their cost (output/cost.py)
        **partial_marker(s.subset, n_samples),
        "evalflow": {
            "model": model,  # the whole model config, type included
            "num_fewshot": s.num_fewshot,
            "seed": s.seed,
            "reasoning_effort": s.reasoning_effort,  # how hard the model was asked to think (none: its own)
            "thinking_budget": s.thinking_budget,
            "platform": platform.platform(),
        },
    }


# the top-level keys results.json holds beside lm-eval's (every other key is lm-eval's, as it writes it)
EVALFLOW_KEYS: tuple[str, ...] = (
    "evalflow",
    "evalflow_version",
    "generations",
    "tokens",
    "cost",
    "clustered_stderr",
    PARTIAL,
)


def task_generations(record: RunRecord) -> dict[str, Any]:
    """Each task's generation figures (the ``generations`` output node), for the tasks with generations."""
    stats = {task.task: record.outputs[task.task].get("generations") for task in record.selection.tasks}
    return {name: value for name, value in stats.items() if value is not None}


def task_clusters(record: RunRecord) -> dict[str, Any]:
    """Each clustered task's ``clustered_stderr`` entry (the ``clusters`` output node)."""
    stats = {task.task: record.outputs[task.task].get("clusters") for task in record.selection.tasks}
    return {name: results_entry(value) for name, value in stats.items() if value is not None}


def tokens_and_cost(record: RunRecord) -> dict[str, Any]:
    """The run's ``tokens`` and, with ``prices``, its ``cost`` (output/cost.py); empty without generations."""
    stats = task_generations(record)
    if not stats:
        return {}
    tokens = run_tokens(stats, record.inference)
    cost = run_cost(tokens, record.settings.prices, record.settings.model if record.model is None else record.model)
    return {"tokens": tokens, **({"cost": cost} if cost is not None else {})}


def _run_fields(s: RunSettings, model: Mapping[str, Any]) -> dict[str, Any]:
    """The model, version and chat fields lm-eval puts at the top level, for the ``model`` that
    answered (its config, or run_info.object_model of an object)."""
    name = model_name(model)
    template = chat_template(s)
    return {
        "evalflow_version": version("evalflow"),
        "model_source": str(model.get("type")),
        "model_name": name,
        "model_name_sanitized": sanitize_model_name(name),
        "system_instruction": s.system_instruction,
        "system_instruction_sha": hash_string(s.system_instruction) if s.system_instruction else None,
        "fewshot_as_multiturn": s.fewshot_as_multiturn,
        "chat_template": template,
        "chat_template_sha": hash_string(template) if template else None,
    }


# lm-eval 0.4.13's TaskConfig fields, in its order (the order of its dump)
LMEVAL_TASK_FIELDS = (
    "task",
    "task_alias",
    "tag",
    "custom_dataset",
    "dataset_path",
    "dataset_name",
    "dataset_kwargs",
    "training_split",
    "validation_split",
    "test_split",
    "fewshot_split",
    "process_docs",
    "doc_to_text",
    "doc_to_target",
    "doc_to_image",
    "doc_to_audio",
    "unsafe_code",
    "doc_to_choice",
    "process_results",
    "use_prompt",
    "description",
    "target_delimiter",
    "fewshot_delimiter",
    "fewshot_config",
    "num_fewshot",
    "metric_list",
    "output_type",
    "generation_kwargs",
    "repeats",
    "filter_list",
    "should_decontaminate",
    "doc_to_decontamination_query",
    "gen_prefix",
    "metadata",
)


def lmeval_task_config(task: Any, num_fewshot: int, gen_kwargs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A task's entry under ``configs`` as lm-eval 0.4.13 dumps it (``TaskConfig.to_dict``), in its
    key order: no ``None`` values and no ``tag``; ``fewshot_config`` filled from the task's own
    fields (``FewshotConfig.from_dict``); ``metadata`` with ``config_source`` (the command line's
    model arguments and --metadata, which lm-eval's TaskManager merges in, are the run's metadata setting);
    ``num_fewshot`` as the run used it; a generate_until task's ``generation_kwargs`` updated with
    the run's ``gen_kwargs`` (lm-eval's ``set_config(..., update=True)``). The split few-shot examples
    were actually drawn from is the manifest's ``fewshot_split``."""
    config = {k: v for k, v in task.to_dict().items() if v is not None and k != "tag"}
    if gen_kwargs and task.output_type == "generate_until":
        config["generation_kwargs"] = {**dict(config.get("generation_kwargs") or {}), **dict(gen_kwargs)}
    inherited = {
        "split": task.fewshot_split,
        "process_docs": task.process_docs,
        "fewshot_delimiter": task.fewshot_delimiter,
        "target_delimiter": task.target_delimiter,
        "gen_prefix": task.gen_prefix,
        "doc_to_text": task.doc_to_text,
        "doc_to_choice": task.doc_to_choice,
        "doc_to_target": task.doc_to_target,
    }
    fewshot = {
        "sampler": "default",
        "fewshot_indices": None,
        "samples": None,
        **inherited,
        **dict(task.fewshot_config or {}),
    }
    order = FEWSHOT_CONFIG_KEYS
    config["fewshot_config"] = {k: _printable(fewshot[k]) for k in (*order, *(k for k in fewshot if k not in order))}
    config["num_fewshot"] = num_fewshot
    source = task.source if task.source and not task.source.startswith("<") else "inline"
    config["metadata"] = {**dict(task.metadata or {}), "config_source": source}
    rank = {name: i for i, name in enumerate(LMEVAL_TASK_FIELDS)}
    return {k: config[k] for k in sorted(config, key=lambda k: rank.get(k, len(rank)))}


def _printable(value: Any) -> Any:
    """A function reference as its text (lm-eval prints a callable's source, or its str)."""
    return value if value is None or isinstance(value, (str, int, float, bool, list, dict, tuple)) else str(value)


def _aggregates(record: RunRecord, name: str) -> bool:
    return any(g.name == name and g.aggregate_metric_list for g in record.selection.groups)


def ran_device(described: Any, model: Mapping[str, Any]) -> Any:
    """results.json's ``config.device``: the device the model ran on when this run loaded it (what
    its ``describe()`` says: ``model.device=auto`` resolved, or a fallback), else ``model.device``
    as asked (a run served from the cache ran nowhere)."""
    if isinstance(described, Mapping) and "device" in described:
        return described["device"]
    return model.get("device")


def _config(s: RunSettings, model: Mapping[str, Any], model_fields: Mapping[str, Any], device: Any) -> dict[str, Any]:
    """results.json's ``config``: the run's settings under lm-eval's names (one seed for all four),
    with the model's own fields where lm-eval writes them (``get_model_info``)."""
    return {
        "model": str(model.get("type")),
        "model_args": {k: v for k, v in model.items() if k != "type"},
        **model_fields,
        "batch_size": s.batch_size,
        "batch_sizes": [],
        "device": device,
        "use_cache": None if s.recompute else str(s.cache_dir),  # lm-eval's: the folder answers were read from
        "limit": s.limit,
        "bootstrap_iters": s.bootstrap_iters,
        "gen_kwargs": s.gen_kwargs,
        "random_seed": s.seed,
        "numpy_seed": s.seed,
        "torch_seed": s.seed,
        "fewshot_seed": s.seed,
    }


def _propagate(record: RunRecord, n_shot: dict[str, Any], hib: dict[str, Any]) -> None:
    """lm-eval's ``_propagate_num_fewshot`` and ``_propagate_higher_is_better`` for every group:
    its n-shot when all its tasks share one; per metric, the tasks' direction (None if they differ)."""
    for group in record.selection.groups:
        leaves = _leaves(record, group.name)
        shots = {n_shot[t] for t in leaves if t in n_shot}
        if len(shots) == 1:
            n_shot[group.name] = shots.pop()
        merged: dict[str, Any] = {}
        for leaf in leaves:
            for metric, higher in hib.get(leaf, {}).items():
                if metric not in merged:
                    merged[metric] = higher
                elif merged[metric] is not None and merged[metric] != higher:
                    log.warning(
                        "group '%s': tasks disagree on higher_is_better for %s; recording None", group.name, metric
                    )
                    merged[metric] = None
        if merged:
            hib[group.name] = merged


def _leaves(record: RunRecord, name: str) -> list[str]:
    groups = {g.name: g for g in record.selection.groups}
    if name not in groups:
        return [name]
    return [leaf for member in groups[name].members for leaf in _leaves(record, member)]


def _group_results(record: RunRecord, results: Mapping[str, Any], n_samples: Mapping[str, Any]) -> dict[str, Any]:
    """Each group aggregated over all its leaf tasks, nested groups included (lm-eval 0.4.13):
    ``sample_len`` sums the leaves' documents; ``sample_count`` those behind each metric."""
    if not record.selection.groups:
        return {}
    from evalflow.scoring.group_scores import aggregate_group  # numpy: only when there are groups

    out: dict[str, Any] = {}
    for group in record.selection.groups:
        leaves = _leaves(record, group.name)
        members = [(_metrics_only(results[t]), n_samples[t]["effective"]) for t in leaves]
        metrics = aggregate_group(group.name, group.aggregate_metric_list, members, leaves)
        entry: dict[str, Any] = {"alias": group.group_alias or group.name, "name": group.name}
        if group.aggregate_metric_list:
            entry["sample_len"] = sum(size for _, size in members)
            entry.update(metrics)
            counts = {key: sum(size for m, size in members if key in m) for key in metrics if "_stderr," not in key}
            if counts:
                entry["sample_count"] = counts
        out[group.name] = entry
    return out


def _metrics_only(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if "," in k}


# --- what the lm-eval front door changes ------------------------------------------------------


def with_samples(results: Mapping[str, Any], rows: Callable[[str], list[dict[str, Any]]]) -> dict[str, Any]:
    """``results`` with lm-eval's ``samples``: each task's per-document records (``rows(task)``), as
    ``simple_evaluate`` returns them when samples are logged."""
    return {**results, "samples": {task: rows(task) for task in results["configs"]}}


def task_hash(rows: Sequence[Mapping[str, Any]]) -> str:
    """lm-eval's ``task_hashes`` entry of a task: the hash of its samples' doc, prompt and target hashes."""
    return hash_string("".join(r["doc_hash"] + r["prompt_hash"] + r["target_hash"] for r in rows))


def with_task_hashes(results: Mapping[str, Any], hashes: Mapping[str, str]) -> dict[str, Any]:
    """``results`` with ``task_hashes`` just before ``model_source`` (lm-eval's key order)."""
    out: dict[str, Any] = {}
    for key, value in results.items():
        if key == "model_source":
            out["task_hashes"] = dict(hashes)
        out[key] = value
    out.setdefault("task_hashes", dict(hashes))
    return out


def as_command_gave(
    results: Mapping[str, Any],
    lm_model: str,
    lm_model_args: Mapping[str, Any],
    recorded: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``config.model``, ``config.model_args`` and ``model_source`` as lm-eval writes them: its
    model name (``local-completions``, not the preset), the model args as given (evalflow's whole
    model config stays under ``evalflow.model``), and ``recorded``: the command's seeds, gen_kwargs,
    batch size, limit, use_cache and fewshot_as_multiturn as lm-eval records them, typed as it types
    them (lmeval_compat.translate.recorded_config)."""
    out = dict(results)  # the tasks' metadata already holds the model args (the run's metadata setting)
    if "config" in out:
        config = {**out["config"], "model": lm_model, "model_args": dict(lm_model_args)}
        out["config"] = {k: (recorded or {}).get(k, v) for k, v in config.items()}  # lm-eval's seeds, gen_kwargs
    if "fewshot_as_multiturn" in out and recorded and "fewshot_as_multiturn" in recorded:
        out["fewshot_as_multiturn"] = recorded["fewshot_as_multiturn"]  # lm-eval's tracker: the flag as given
    if "model_source" in out:
        out["model_source"] = lm_model
    return out
