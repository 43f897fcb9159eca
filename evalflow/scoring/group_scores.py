"""Group scores: a group's metric as the (size-weighted) mean of its member tasks' metrics.

This is lm-eval 0.4.13's ``Group.aggregate``. For each entry of the group's
``aggregate_metric_list`` and each filter (the entry's ``filter_list``, else every filter any member
reports the metric under), the group value is the mean of the members' values, weighted by their
sample counts when ``weight_by_size`` (the default). The stderr is the pooled sample stderr when
weighting by size, else the stderr of an unweighted mean of independent means; ``"N/A"`` as soon
as one member has none::

    >>> members = [({"acc,none": 0.5, "acc_stderr,none": 0.1}, 100),
    ...            ({"acc,none": 1.0, "acc_stderr,none": 0.0}, 300)]
    >>> aggregate_group("demo", [{"metric": "acc"}], members)["acc,none"]
    0.875
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalflow.errors import DataError, TaskError, closest
from evalflow.taskspec.format.spec import FunctionRef

log = logging.getLogger(__name__)

_KEYS = ("metric", "filter_list", "aggregation", "weight_by_size")


@dataclass(frozen=True)
class AggMetric:
    """One ``aggregate_metric_list`` entry (lm-eval's ``AggMetricConfig``)."""

    metric: str
    filter_list: tuple[str, ...] | None = None
    weight_by_size: bool = True


def aggregate_subtask_metrics(metrics: Sequence[float], sizes: Sequence[int], weight_by_size: bool = True) -> float:
    """The group value: the members' values averaged, weighted by size unless told otherwise."""
    if not weight_by_size:
        sizes = [1] * len(sizes)
    return sum([metric * size for metric, size in zip(metrics, sizes)]) / sum(sizes)


def pooled_sample_stderr(stderrs: Sequence[float], sizes: Sequence[int]) -> float:
    """Stderr of the size-weighted mean, pooling the members' sample variances."""
    pooled = sum([(size - 1) * stderr**2 * size for size, stderr in zip(sizes, stderrs)]) / (sum(sizes) - len(sizes))
    return math.sqrt(pooled / sum(sizes))


def unweighted_mean_stderr(stderrs: Sequence[float]) -> float:
    """Stderr of the plain mean of k independent means: ``sqrt(sum(se_i**2)) / k``."""
    return math.sqrt(sum(stderr**2 for stderr in stderrs)) / len(stderrs)


def aggregate_group(
    group_name: str,
    aggregate_metric_list: Sequence[Mapping[str, Any]] | None,
    member_results: Sequence[tuple[Mapping[str, Any], int]],
    member_names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The group's ``"metric,filter"`` and ``"metric_stderr,filter"`` values, in lm-eval's order.

    ``member_results`` holds, per leaf task of the group (lm-eval aggregates over all leaf tasks,
    nested groups included), its metrics dict and its number of evaluated samples. A group without
    an ``aggregate_metric_list`` reports no numbers of its own (an empty dict), as in lm-eval.
    ``member_names`` (the leaf tasks' names) lets the warning for a metric that some members lack
    name them, as lm-eval's does.
    """
    if not aggregate_metric_list:
        return {}
    if not member_results:
        raise DataError(f"group '{group_name}' has no member task results to aggregate")
    out: dict[str, Any] = {}
    for index, entry in enumerate(aggregate_metric_list):
        config = _parse(group_name, index, entry)
        filters = config.filter_list if config.filter_list is not None else _discover(config.metric, member_results)
        for filter_name in filters:
            out.update(_aggregate_one(group_name, config, filter_name, member_results, member_names))
    return out


def _aggregate_one(
    group_name: str,
    config: AggMetric,
    filter_name: str,
    members: Sequence[tuple[Mapping[str, Any], int]],
    names: Sequence[str] | None = None,
) -> dict[str, Any]:
    key, stderr_key = f"{config.metric},{filter_name}", f"{config.metric}_stderr,{filter_name}"
    values: list[float] = []
    sizes: list[int] = []
    stderrs: list[Any] = []
    for metrics, size in members:
        if metrics.get(key) is not None:  # None: a judge result no document has a value for
            values.append(metrics[key])
            sizes.append(size)
            if metrics.get(stderr_key) is not None:
                stderrs.append(metrics[stderr_key])
    if not values:
        if any(key in metrics for metrics, _ in members):  # reported, without a value: so is the group's
            return {key: None, stderr_key: "N/A"}
        log.warning("group '%s': no member reports metric '%s'", group_name, key)
        return {}
    if len(values) < len(members):
        lacking = [names[i] for i, (metrics, _) in enumerate(members) if metrics.get(key) is None] if names else []
        shown = f": {', '.join(lacking[:5])}" + (f" and {len(lacking) - 5} more" if len(lacking) > 5 else "")
        log.warning(
            "group '%s': metric '%s' is missing in %d of %d tasks%s; the group score averages the others only",
            group_name,
            key,
            len(members) - len(values),
            len(members),
            shown if lacking else "",
        )
    out: dict[str, Any] = {key: aggregate_subtask_metrics(values, sizes, config.weight_by_size)}
    if len(stderrs) == len(values) and "N/A" not in stderrs:
        out[stderr_key] = (
            pooled_sample_stderr(stderrs, sizes) if config.weight_by_size else unweighted_mean_stderr(stderrs)
        )
    else:
        out[stderr_key] = "N/A"
    return out


def _discover(metric: str, members: Sequence[tuple[Mapping[str, Any], int]]) -> tuple[str, ...]:
    """Every filter a member reports ``metric`` under, sorted (lm-eval's auto-discovery)."""
    prefix = f"{metric},"
    found = {k[len(prefix) :] for metrics, _ in members for k in metrics if k.startswith(prefix) and "_stderr" not in k}
    return tuple(sorted(found))


def _parse(group_name: str, index: int, entry: Any) -> AggMetric:
    where = f"group '{group_name}' aggregate_metric_list[{index}]"
    if not isinstance(entry, Mapping) or "metric" not in entry:
        raise TaskError(f"{where} must be a mapping with a 'metric' key, got {entry!r}")
    for key in entry:
        if key not in _KEYS:
            raise TaskError(f"{where}: unknown key '{key}'; {closest(str(key), _KEYS)} Fix or remove it.")
    aggregation = entry.get("aggregation", "mean")
    if isinstance(aggregation, FunctionRef) or callable(aggregation):
        # lm-eval accepts a callable here but still takes the (weighted) mean; so does evalflow.
        log.warning("%s: a custom group aggregation is ignored by lm-eval 0.4.13; using the mean", where)
    elif aggregation != "mean":
        raise TaskError(f"{where}: aggregation '{aggregation}' is not supported; 'mean' is the only group aggregation")
    filters = entry.get("filter_list")
    if isinstance(filters, str):
        filters = (filters,)
    weight = entry.get("weight_by_size", True)
    if not isinstance(weight, bool):
        raise TaskError(f"{where}: weight_by_size must be true or false, got {weight!r}")
    return AggMetric(str(entry["metric"]), tuple(filters) if filters is not None else None, weight)
