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
        configs[task.task] = task.to_dict()
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
    """Groups aggregated bottom-up (a group of groups uses its member groups' numbers)."""
    if not record.selection.groups:
        return {}
    from evalflow.scoring.groups import aggregate_group  # numpy: only when there are groups
    done: dict[str, tuple[dict[str, Any], int]] = {
        name: (_metrics_only(r), n_samples[name]["effective"]) for name, r in results.items()
    }
    pending = list(record.selection.groups)
    out: dict[str, Any] = {}
    while pending:
        ready = [g for g in pending if all(m in done for m in g.members)]
        if not ready:
            raise RuntimeError(f"groups with unresolvable members: {[g.name for g in pending]}")
        for group in ready:
            members = [done[m] for m in group.members]
            metrics = aggregate_group(group.name, group.aggregate_metric_list, members)
            out[group.name] = {"name": group.name, "alias": group.group_alias or group.name, **metrics}
            done[group.name] = (metrics, sum(n for _, n in members))
            pending.remove(group)
    return out


def _metrics_only(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if "," in k}
