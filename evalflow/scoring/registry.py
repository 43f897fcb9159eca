"""One generic name -> object registry, and the three registries of scoring components.

The registry name is the YAML name: ``metric: acc`` in a task's ``metric_list`` looks up
``METRICS.get("acc")``, ``aggregation: mean`` looks up ``AGGREGATIONS``, ``function: regex`` in a
``filter_list`` looks up ``FILTERS``, and ``reduction: pass@k`` (how a document's repeats become one
value) looks up ``REDUCTIONS``. Users extend evalflow exactly as they extend lm-eval::

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

This module imports nothing from ``evalflow.scoring``; the built-in components register themselves
when ``evalflow.scoring`` is imported (its ``__init__`` imports every module).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from evalflow.errors import TaskError, closest

T = TypeVar("T")

OUTPUT_TYPES: tuple[str, ...] = (
    "loglikelihood",
    "loglikelihood_rolling",
    "multiple_choice",
    "generate_until",
)


class Registry(Generic[T]):
    """A mapping from YAML names to components, with did-you-mean errors on a miss.

    Registering a second, different object under a taken name is refused: silently replacing a
    built-in metric would change every task's numbers. Re-registering the same function (same module
    and qualified name, as when a module is reloaded) replaces it.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._objects: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of :meth:`add`."""

        def decorate(obj: T) -> T:
            self.add(name, obj)
            return obj

        return decorate

    def add(self, name: str, obj: T) -> None:
        if not isinstance(name, str) or not name:
            raise TaskError(f"a {self.kind} must be registered under a non-empty string name, got {name!r}")
        current = self._objects.get(name)
        if current is not None and current is not obj and _identity(current) != _identity(obj):
            raise TaskError(
                f"the {self.kind} name '{name}' is already registered ({_describe(current)}); "
                f"registering {_describe(obj)} under it would silently change results. "
                "Pick another name for your component."
            )
        self._objects[name] = obj

    def get(self, name: str, *, where: str = "") -> T:
        """The component called ``name``; ``where`` (file and key) is named in the error."""
        try:
            return self._objects[name]
        except (KeyError, TypeError):
            place = f"{where}: " if where else ""
            raise TaskError(
                f"{place}unknown {self.kind} {name!r}; {closest(str(name), self._objects)} "
                f"Use a registered {self.kind} name, or register yours with evalflow.register_{self.kind}(...) in "
                "a module the run imports first (imports=[my_module] on the command line; from Python, import it)."
            ) from None

    def find(self, name: str) -> T | None:
        """The component called ``name``, or None (for lookups where a miss is not an error)."""
        return self._objects.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._objects))

    def __contains__(self, name: object) -> bool:
        return name in self._objects

    def __iter__(self) -> Iterator[str]:
        return iter(self._objects)

    def __len__(self) -> int:
        return len(self._objects)


def _identity(obj: Any) -> tuple[str, str]:
    target = obj.fn if isinstance(obj, Metric) else obj
    return (getattr(target, "__module__", ""), getattr(target, "__qualname__", repr(target)))


def _describe(obj: Any) -> str:
    module, name = _identity(obj)
    return f"{module}.{name}" if module else name


@dataclass(frozen=True)
class Metric:
    """A registered metric: its per-document function and its defaults for aggregation.

    ``fn`` is called, for generate_until tasks, as ``fn(references=[gold], predictions=[result],
    **kwargs)`` when its signature accepts that, else as ``fn([gold, result])`` (lm-eval's two
    calling conventions). For the other output types lm-eval computes the built-in metrics itself
    and never calls ``fn``; evalflow does the same.
    """

    name: str
    fn: Callable[..., Any]
    higher_is_better: bool | None
    aggregation: str | None
    output_types: tuple[str, ...]


METRICS: Registry[Metric] = Registry("metric")
AGGREGATIONS: Registry[Callable[..., Any]] = Registry("aggregation")
FILTERS: Registry[Callable[..., Any]] = Registry("filter")
REDUCTIONS: Registry[Callable[..., Any]] = Registry("reduction")
JUDGE_PARSERS: Registry[Callable[..., Any]] = Registry("judge_parser")


def register_judge_parser(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``factory(options, where) -> parse``: ``parser: {type: NAME, ...options}`` of a judge
    metric. ``parse(judge_text)`` returns the score, or None when the text does not parse; the
    factory checks the options at load time and raises a TaskError naming ``where``."""
    return JUDGE_PARSERS.register(name)


def register_aggregation(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(items) -> value``, the function that turns per-document values into one number."""
    return AGGREGATIONS.register(name)


def register_reduction(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(samples, k) -> value``: how one document's k scored samples become its value.

    ``samples`` is a :class:`~evalflow.scoring.reductions.RepeatSamples` (each sample's filtered
    answer and metric value, and the metric as a function of an answer); ``k`` is the number after
    ``@`` in the YAML name (``pass@4``), or the task's ``repeats`` for ``pass@k``. The name is the
    YAML's ``reduction:`` value; a name ending ``@k`` accepts a number in place of ``k``.
    """
    return REDUCTIONS.register(name)


def register_filter(name: str) -> Callable[[T], T]:
    """Register a filter: ``fn(resps, docs, **kwargs) -> new resps`` or an lm-eval ``Filter`` class.

    ``resps`` holds, per lm-eval instance, the list of its responses; the function returns the
    filtered value per instance (a list to keep filtering, a single value once collapsed).
    """
    return FILTERS.register(name)  # type: ignore[return-value]


def register_metric(
    name: str,
    *,
    higher_is_better: bool,
    aggregation: str,
    output_types: str | tuple[str, ...] | list[str] = ("generate_until",),
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a metric under ``name`` with its default aggregation and direction.

    The aggregation must already be registered, as in lm-eval (its decorator looks it up at once).
    """
    AGGREGATIONS.get(aggregation, where=f"register_metric('{name}')")
    types = (output_types,) if isinstance(output_types, str) else tuple(output_types)
    for output_type in types:
        if output_type not in OUTPUT_TYPES:
            raise TaskError(
                f"register_metric('{name}'): unknown output type {output_type!r}; "
                f"{closest(output_type, OUTPUT_TYPES)}"
            )

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        METRICS.add(name, Metric(name, fn, higher_is_better, aggregation, types))
        return fn

    return decorate
