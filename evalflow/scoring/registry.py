"""The registries of scoring components (instances of [`Registry`][evalflow.registry.Registry]).

The registry name is the YAML name: ``metric: acc`` in a task's ``metric_list`` looks up
``METRICS.get("acc")``, ``aggregation: mean`` looks up ``AGGREGATIONS``, ``function: regex`` in a
``filter_list`` looks up ``FILTERS``, and ``reduction: pass@k`` (how a document's repeats become one
value) looks up ``REDUCTIONS``. Users extend evalflow exactly as they extend lm-eval:

    from evalflow.scoring import register_aggregation, register_filter, register_metric

    @register_aggregation("max")
    def max_agg(items):
        return max(items)

    @register_metric("longest", higher_is_better=True, aggregation="max")
    def longest(references, predictions, **kwargs):
        return len(predictions[0])

    @register_filter("strip_dots")
    def strip_dots(resps, docs):
        return [[r.strip(".") for r in inst] for inst in resps]

The registry itself is evalflow's one generic `evalflow.registry.Registry`. This module
imports nothing from ``evalflow.scoring``; the built-in components register themselves
when ``evalflow.scoring`` is imported (its ``__init__`` imports every module).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from evalflow.errors import TaskError, closest
from evalflow.registry import Registry as GenericRegistry
from evalflow.registry import qualified

T = TypeVar("T")
_F = TypeVar("_F", bound=Callable[..., Any])  # a filter function or class, handed back as it is

OUTPUT_TYPES: tuple[str, ...] = (
    "loglikelihood",
    "loglikelihood_rolling",
    "multiple_choice",
    "generate_until",
)


class Registry(GenericRegistry[T]):
    """A registry of scoring components ([`Registry`][evalflow.registry.Registry]), whose errors
    are `TaskError`s: the name comes from a task's YAML.

    Args:
        kind: `"metric"`, `"aggregation"`, `"filter"` or `"reduction"`: the YAML key that names one.
    """

    def __init__(self, kind: str) -> None:
        super().__init__(
            kind,
            error=TaskError,
            noun="component",
            identity=_identity,
            hint=f"Use a registered {kind} name, or register yours with evalflow.register_{kind}(...) in a module "
            "the run imports first (imports=[my_module] on the command line; from Python, import it).",
        )


def _identity(obj: Any) -> str:
    return qualified(obj.fn if isinstance(obj, Metric) else obj)


@dataclass(frozen=True)
class Metric:
    """A registered metric: its per-document function and its defaults for aggregation.

    For the output types other than generate_until lm-eval computes the built-in metrics itself
    and never calls `fn`; evalflow does the same.

    Attributes:
        name: The YAML name (`metric: NAME`).
        fn: Called, for generate_until tasks, as `fn(references=[gold], predictions=[result],
            **kwargs)` when its signature accepts that, else as `fn([gold, result])` (lm-eval's two
            calling conventions).
        higher_is_better: The default direction, for the results table and `compare`'s gate.
        aggregation: The default aggregation's registered name.
        output_types: The task output types the metric accepts.
        value_range: The (low, high) one document's value can take, where the metric knows it
            (`pass_at_k`: 0 to 1; a judge's 1-to-10 score): what an anytime-valid interval over
            its documents needs (the sequential gate, `evalflow gate`). None: unknown.
    """

    name: str
    fn: Callable[..., Any]
    higher_is_better: bool | None
    aggregation: str | None
    output_types: tuple[str, ...]
    value_range: tuple[float, float] | None = None


METRICS: Registry[Metric] = Registry("metric")
AGGREGATIONS: Registry[Callable[..., Any]] = Registry("aggregation")
FILTERS: Registry[Callable[..., Any]] = Registry("filter")
REDUCTIONS: Registry[Callable[..., Any]] = Registry("reduction")


def register_aggregation(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register an aggregation: `fn(items) -> value`, per-document values into one number.

    Args:
        name: The YAML name (`aggregation: NAME`).

    Returns:
        A decorator that registers the function and returns it unchanged.
    """
    return AGGREGATIONS.register(name)


def register_reduction(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a reduction: `fn(samples, k) -> value`, one document's k scored samples into its value.

    `samples` is an `evalflow.scoring.reductions.RepeatSamples` (each sample's filtered answer
    and metric value, and the metric as a function of an answer); `k` is the number after `@` in
    the YAML name (`pass@4`), or the task's `repeats` for `pass@k`.

    Args:
        name: The YAML's `reduction:` value; a name ending `@k` accepts a number in place of `k`.

    Returns:
        A decorator that registers the function and returns it unchanged.
    """
    return REDUCTIONS.register(name)


def register_filter(name: str) -> Callable[[_F], _F]:
    """Register a filter: `fn(resps, docs, **kwargs) -> new resps`, or an lm-eval `Filter` class.

    `resps` holds, per lm-eval instance, the list of its responses; the function returns the
    filtered value per instance (a list to keep filtering, a single value once collapsed). The
    `kwargs` are the options of the filter's entry in the task's `filter_list`.

    Args:
        name: The YAML name (`function: NAME` in a `filter_list` pipeline).

    Returns:
        A decorator that registers the function or class and returns it unchanged.
    """

    def decorate(fn: _F) -> _F:  # Registry.register's, typed for what it is given rather than Callable
        FILTERS.add(name, fn)
        return fn

    return decorate


def register_metric(
    name: str,
    *,
    higher_is_better: bool,
    aggregation: str,
    output_types: str | tuple[str, ...] | list[str] = ("generate_until",),
    value_range: tuple[float, float] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a metric under `name` with its default aggregation and direction.

    Args:
        name: The YAML name (`metric: NAME` in a task's `metric_list`).
        higher_is_better: The default direction (a task's entry may override it).
        aggregation: The default aggregation's name; it must already be registered, as in lm-eval
            (its decorator looks it up at once).
        output_types: The task output types the metric accepts (lm-eval's names).
        value_range: The (low, high) one document's value can take, when it is not 0/1: the
            sequential gate (`evalflow gate`) decides such a metric early only within a range.

    Returns:
        A decorator that registers the function and returns it unchanged.

    Raises:
        TaskError: The aggregation is not registered, an output type is unknown, or the range
            is not (low, high) with low < high.
    """
    AGGREGATIONS.get(aggregation, where=f"register_metric('{name}')")
    types = (output_types,) if isinstance(output_types, str) else tuple(output_types)
    for output_type in types:
        if output_type not in OUTPUT_TYPES:
            raise TaskError(
                f"register_metric('{name}'): unknown output type {output_type!r}; {closest(output_type, OUTPUT_TYPES)}"
            )

    try:
        bounds = None if value_range is None else finite_range(value_range)
    except (TypeError, ValueError):
        raise TaskError(
            f"register_metric('{name}'): value_range={value_range!r} is not (low, high) with finite low < high; "
            "a metric with no finite bound declares none (value_range=None)"
        ) from None

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        METRICS.add(name, Metric(name, fn, higher_is_better, aggregation, types, bounds))
        return fn

    return decorate


def finite_range(value: Sequence[Any]) -> tuple[float, float]:
    """``(low, high)`` as floats when both are finite and low < high, else ValueError: the one rule
    for a metric's declared range (``register_metric(value_range=)``, the gate's ``ranges=``)."""
    low, high = (float(v) for v in value)  # not two values: ValueError
    if not -math.inf < low < high < math.inf:
        raise ValueError(value)
    return (low, high)


def declared_range(name: str) -> tuple[float, float] | None:
    """The value range the metric registered as ``name`` declares (``register_metric``'s
    ``value_range``); None for an unregistered metric or one that declares none."""
    metric = METRICS.find(name)
    return None if metric is None else metric.value_range
