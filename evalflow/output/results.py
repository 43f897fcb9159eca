"""lm-eval's results layout, built from the stage outputs of a run.

    {"results": {task: {"alias": ..., "acc,none": 0.5, "acc_stderr,none": 0.05}},
     "groups": {...}, "group_subtasks": {...}, "configs": {...}, "versions": {...},
     "n-shot": {...}, "higher_is_better": {...}, "n-samples": {...}, "config": {...}}
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Any, Mapping

from evalflow.dag.inference import InferenceCounts
from evalflow.dag.runner import StageEvent
from evalflow.settings import RunSettings
from evalflow.taskspec.index import Selection


@dataclass(frozen=True)
class RunRecord:
    """Everything a finished run produced, for the writers."""

    settings: RunSettings
    selection: Selection
    outputs: Mapping[str, Mapping[str, Any]]  # task -> stage -> output
    events: list[StageEvent]
    inference: InferenceCounts
    started: float
    finished: float


def build_results(record: RunRecord) -> dict[str, Any]:
    s = record.settings
    results: dict[str, Any] = {}
    configs, versions, n_shot, hib, n_samples = {}, {}, {}, {}, {}
    for task in record.selection.tasks:
        out = record.outputs[task.task]
        result = out["aggregate"]
        results[task.task] = {
            "name": task.task,
            "alias": task.task_alias or task.task,
            "sample_len": len(out["fewshot"]),
            **dict(result.metrics),
        }
        configs[task.task] = {**task.to_dict(), "fewshot_split": out["load_docs"].fewshot_split}  # the split used
        versions[task.task] = task.version
        n_shot[task.task] = s.num_fewshot if s.num_fewshot is not None else (task.num_fewshot or 0)
        hib[task.task] = dict(result.higher_is_better)
        n_samples[task.task] = {"original": len(out["load_docs"].docs), "effective": len(out["fewshot"])}
    groups = _group_results(record, results, n_samples)
    return {
        "results": {**results, **groups},
        "groups": groups,
        "group_subtasks": {g.name: list(g.members) for g in record.selection.groups},
        "configs": configs,
        "versions": versions,
        "n-shot": n_shot,
        "higher_is_better": hib,
        "n-samples": n_samples,
        "config": {
            "model": dict(s.model),
            "batch_size": s.batch_size,
            "limit": s.limit,
            "num_fewshot": s.num_fewshot,
            "seed": s.seed,
            "gen_kwargs": s.gen_kwargs,
            "bootstrap_iters": s.bootstrap_iters,
        },
        "date": record.started,
        "total_evaluation_time_seconds": str(round(record.finished - record.started, 3)),
        "platform": platform.platform(),
    }


def _group_results(record: RunRecord, results: Mapping[str, Any], n_samples: Mapping[str, Any]) -> dict[str, Any]:
    """Each group aggregated over all its leaf tasks, nested groups included (lm-eval 0.4.13)."""
    if not record.selection.groups:
        return {}
    from evalflow.scoring.groups import aggregate_group  # numpy: only when there are groups

    groups = {g.name: g for g in record.selection.groups}

    def leaves(name: str) -> list[str]:
        if name not in groups:
            return [name]
        return [leaf for member in groups[name].members for leaf in leaves(member)]

    out: dict[str, Any] = {}
    for group in record.selection.groups:
        members = [(_metrics_only(results[t]), n_samples[t]["effective"]) for t in leaves(group.name)]
        metrics = aggregate_group(group.name, group.aggregate_metric_list, members)
        out[group.name] = {"name": group.name, "alias": group.group_alias or group.name, **metrics}
    return out


def _metrics_only(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if "," in k}
