"""Metrics: lm-eval's registered metrics, and a task's ``metric_list`` resolved against them.

Most of lm-eval's metrics are passthroughs: for loglikelihood, multiple_choice and rolling tasks
the per-document values are computed by :func:`~evalflow.scoring.process.score_document` and the
metric only names them and picks their aggregation. Only generate_until tasks call a metric's
function (``exact_match`` here; user metrics and ``!function`` metrics alike).

:func:`task_metric_specs` is lm-eval's ``ConfigurableTask.__init__`` metric setup: per metric, the
function, its keyword arguments (every other key of the ``metric_list`` entry), the aggregation and
whether higher is better, with lm-eval's defaults when the task has no ``metric_list``::

    >>> from evalflow.taskspec.format.spec import TaskConfig
    >>> [s.name for s in task_metric_specs(TaskConfig(task="t", output_type="multiple_choice"))]
    ['acc', 'acc_norm']
"""

from __future__ import annotations

import difflib
import inspect
import re
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import evalflow.scoring.aggregations  # noqa: F401  (registers the aggregations named below)
from evalflow.errors import TaskError, closest
from evalflow.judges.judge_metrics import judge_metric
from evalflow.judges.judge_spec import JudgeSpec
from evalflow.scoring import lazy_numpy as np
from evalflow.scoring.reductions import Reduction, parse_reductions
from evalflow.scoring.registry import AGGREGATIONS, METRICS, OUTPUT_TYPES, register_metric
from evalflow.taskspec.format.spec import FunctionRef, TaskConfig

DEFAULT_METRICS: dict[str, tuple[str, ...]] = {
    "loglikelihood": ("perplexity", "acc"),
    "loglikelihood_rolling": ("word_perplexity", "byte_perplexity", "bits_per_byte"),
    "multiple_choice": ("acc", "acc_norm"),
    "generate_until": ("exact_match",),
}
"""lm-eval's ``DEFAULT_METRIC_REGISTRY``: the metrics of a task without ``metric_list``."""

_RESERVED = ("metric", "aggregation", "higher_is_better", "hf_evaluate", "reduction", "judge")


def passthrough(items: Any) -> Any:
    """The per-document value is the item itself (lm-eval's ``acc_fn``, ``bleu_fn``, ...)."""
    return items


_PASSTHROUGH: tuple[tuple[str, bool, str, tuple[str, ...]], ...] = (
    ("acc", True, "mean", ("loglikelihood", "multiple_choice")),
    ("acc_norm", True, "mean", ("loglikelihood", "multiple_choice")),
    ("acc_bytes", True, "mean", ("loglikelihood", "multiple_choice")),
    ("acc_mutual_info", True, "mean", ("multiple_choice",)),
    ("acc_all", True, "mean", ("loglikelihood",)),
    ("brier_score", False, "brier_score", ("multiple_choice",)),
    ("likelihood", True, "mean", ("multiple_choice",)),
    ("mcc", True, "matthews_corrcoef", ("multiple_choice",)),
    ("f1", True, "f1", ("multiple_choice",)),
    ("perplexity", False, "perplexity", ("loglikelihood",)),
    ("word_perplexity", False, "weighted_perplexity", ("loglikelihood_rolling",)),
    ("byte_perplexity", False, "weighted_perplexity", ("loglikelihood_rolling",)),
    ("bits_per_byte", False, "bits_per_byte", ("loglikelihood_rolling",)),
    ("bleu", True, "bleu", ("generate_until",)),
    ("chrf", True, "chrf", ("generate_until",)),
    ("chrf++", True, "chrf++", ("generate_until",)),
    ("ter", False, "ter", ("generate_until",)),
)
for _name, _higher, _agg, _types in _PASSTHROUGH:
    register_metric(_name, higher_is_better=_higher, aggregation=_agg, output_types=_types)(passthrough)


@register_metric(
    "bypass",
    higher_is_better=True,
    aggregation="bypass",
    output_types=("loglikelihood", "multiple_choice", "generate_until"),
)
def bypass(items: Any) -> None:
    return None


@register_metric("exact_match", higher_is_better=True, aggregation="mean", output_types="generate_until")
def exact_match(
    references: list[Any],
    predictions: list[Any],
    regexes_to_ignore: list[str] | None = None,
    ignore_case: bool = False,
    ignore_punctuation: bool = False,
    ignore_numbers: bool = False,
) -> dict[str, float]:
    """HF evaluate's exact_match as lm-eval vendors it (numpy string arrays, same quirks)."""
    preds: Any = predictions
    refs: Any = references
    if regexes_to_ignore is not None:
        for pattern in regexes_to_ignore:
            preds = np.array([re.sub(pattern, "", x) for x in preds])
            refs = np.array([re.sub(pattern, "", x) for x in refs])
    else:
        preds, refs = np.asarray(preds), np.asarray(refs)
    if ignore_case:
        preds, refs = np.char.lower(preds), np.char.lower(refs)
    if ignore_punctuation:
        table = string.punctuation.maketrans("", "", string.punctuation)
        preds = np.char.translate(preds, table=table)
        refs = np.char.translate(refs, table=table)
    if ignore_numbers:
        table = string.digits.maketrans("", "", string.digits)
        preds = np.char.translate(preds, table=table)
        refs = np.char.translate(refs, table=table)
    return {"exact_match": float(np.mean(preds == refs))}


@dataclass(frozen=True)
class MetricSpec:
    """One entry of a task's metric list, resolved: what computes it and how it is aggregated."""

    name: str
    fn: Callable[..., Any] | None  # None when the task's process_results computes every metric
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    aggregation: Callable[..., Any] = passthrough
    higher_is_better: bool | None = None
    keyword_call: bool = True  # fn(references=, predictions=, **kwargs), else fn([gold, result])
    reductions: tuple[Reduction, ...] = ()  # none: lm-eval 0.4.13's one value from the filtered answer
    judge: JudgeSpec | None = None  # a judge metric: its value is the judge model's parsed answer

    @property
    def output_names(self) -> tuple[str, ...]:
        """The per-document keys this entry reports: its name, or one per reduction."""
        return tuple(r.output_name(self.name) for r in self.reductions) or (self.name,)


_SPEC_CACHE: dict[tuple[Any, ...], tuple[MetricSpec, ...]] = {}


def task_metric_specs(task: TaskConfig) -> tuple[MetricSpec, ...]:
    """The task's metrics in ``metric_list`` order (lm-eval's defaults when it has none).

    Cached per task definition: ``score_document`` asks once per document.
    """
    key = (task.task, task.source, task.output_type, repr(task.metric_list), task.process_results, task.repeats)
    specs = _SPEC_CACHE.get(key)
    if specs is None:
        specs = _resolve_specs(task)
        _SPEC_CACHE[key] = specs
    return specs


def _resolve_specs(task: TaskConfig) -> tuple[MetricSpec, ...]:
    where = task.where()
    if task.output_type not in OUTPUT_TYPES:
        raise TaskError(f"{where} has output_type {task.output_type!r}; {closest(str(task.output_type), OUTPUT_TYPES)}")
    if task.metric_list is None:
        return tuple(_default_spec(name) for name in DEFAULT_METRICS[task.output_type])
    specs = tuple(_spec(task, entry, task.where(f"metric_list[{i}]")) for i, entry in enumerate(task.metric_list))
    reduced = [name for s in specs if s.reductions for name in s.output_names]
    for name in reduced:
        if reduced.count(name) > 1:
            raise TaskError(f"{where} metric_list reports '{name}' twice; give each reduction of a metric once")
    return specs


def _default_spec(name: str) -> MetricSpec:
    metric = METRICS.get(name)
    return MetricSpec(
        name=name,
        fn=metric.fn,
        aggregation=AGGREGATIONS.get(metric.aggregation or "mean"),
        higher_is_better=metric.higher_is_better,
        keyword_call=_accepts_keywords(metric.fn, {}),
    )


def _spec(task: TaskConfig, entry: Any, where: str) -> MetricSpec:
    if not isinstance(entry, Mapping) or "metric" not in entry:
        raise TaskError(f"{where}: each metric_list entry needs a 'metric' key, got {entry!r}")
    if entry.get("hf_evaluate") is True and not _hub_metric_unused(task, entry["metric"]):
        raise TaskError(
            f"{where}: hf_evaluate metrics load from the Hugging Face hub, which evalflow does not "
            "use; register the metric with evalflow.scoring.register_metric or use !function"
        )
    judge = judge_metric(task, entry, where)
    if judge is not None:
        return _judge_spec(task, entry, judge, where)
    _refuse_misspelt_keys(entry, where)
    kwargs = {k: v for k, v in entry.items() if k not in _RESERVED}
    raw = entry["metric"]
    registered = None
    if isinstance(raw, FunctionRef) or callable(raw):
        fn: Callable[..., Any] | None = _resolve(raw)
        name = getattr(fn, "__name__", str(raw))
        registered = METRICS.find(name)  # lm-eval still takes defaults registered under its name
    else:
        name = str(raw)
        registered = METRICS.get(name, where=where) if task.process_results is None else METRICS.find(name)
        fn = registered.fn if registered is not None else None
    if task.process_results is not None:
        fn, kwargs = None, {}
    return MetricSpec(
        name=name,
        fn=fn,
        kwargs=kwargs,
        aggregation=_aggregation(entry, registered, name, where),
        higher_is_better=entry.get("higher_is_better", registered.higher_is_better if registered is not None else None),
        keyword_call=_check_kwargs(fn, kwargs, name, where),
        reductions=parse_reductions(entry["reduction"], task.repeats, f"{where} reduction")
        if "reduction" in entry
        else (),
    )


def _judge_spec(task: TaskConfig, entry: Mapping[str, Any], judge: JudgeSpec, where: str) -> MetricSpec:
    """A judge metric (its judge resolved by :func:`~evalflow.judges.judge_metrics.judge_metric`): no
    metric function (the judge stages compute its value), ``mean`` and higher-is-better unless the
    entry says otherwise."""
    name = judge.metric
    extra = [k for k in entry if k not in _RESERVED]
    if extra:
        raise TaskError(
            f"{where}: judge metric '{name}' takes no option '{extra[0]}'; its options go in the judge: block"
        )
    return MetricSpec(
        name=name,
        fn=None,
        aggregation=_aggregation({"aggregation": "mean", **entry}, None, name, where),
        higher_is_better=entry.get("higher_is_better", True),
        keyword_call=False,
        judge=judge,
        reductions=parse_reductions(entry["reduction"], task.repeats, f"{where} reduction")
        if "reduction" in entry
        else (),
    )


def _hub_metric_unused(task: TaskConfig, metric: Any) -> bool:
    """Whether lm-eval never calls the hub metric that ``hf_evaluate: true`` would load.

    It does not when the task's ``process_results`` computes every metric, nor for a metric that
    lm-eval's own scoring of a non-generation task computes inline (``f1`` of a multiple_choice
    task is the ``(gold, pred)`` pair whatever the hub's ``f1`` is: 740 afrimmlu, sib, kobest...
    tasks of lm-eval 0.4.13 set the flag there). The flag is then inert, and accepted.
    """
    if task.process_results is not None:
        return True
    registered = METRICS.find(metric) if isinstance(metric, str) else None
    return (
        task.output_type != "generate_until" and registered is not None and task.output_type in registered.output_types
    )


def _aggregation(entry: Mapping[str, Any], registered: Any, name: str, where: str) -> Callable[..., Any]:
    agg = entry.get("aggregation")
    if isinstance(agg, str):
        return AGGREGATIONS.get(agg, where=f"{where} aggregation")
    if agg is not None:
        return _resolve(agg)
    if registered is not None and registered.aggregation:
        return AGGREGATIONS.get(registered.aggregation)
    raise TaskError(
        f"{where}: metric '{name}' has no default aggregation, so lm-eval would fail on it; add "
        f"'aggregation: mean' (or another of {', '.join(AGGREGATIONS.names())}) to the entry"
    )


def _resolve(ref: Any) -> Callable[..., Any]:
    if isinstance(ref, FunctionRef):
        from evalflow.taskspec.format.loader import resolve_function

        return resolve_function(ref)
    return ref


def _accepts_keywords(fn: Callable[..., Any] | None, kwargs: Mapping[str, Any]) -> bool:
    """Whether ``fn(references=, predictions=, **kwargs)`` binds (lm-eval tries that call first)."""
    if fn is None:
        return False
    try:
        inspect.signature(fn).bind(references=[], predictions=[], **kwargs)
    except TypeError:
        return False
    except ValueError:  # no signature (a builtin): try the keyword call, as lm-eval does
        return True
    return True


def _refuse_misspelt_keys(entry: Mapping[str, Any], where: str) -> None:
    """A key one letter or two from an entry key (``aggregaton``) is a typo, whatever the output
    type: a multiple_choice task's scoring never passes options to its metrics, so nothing else
    would name it (lm-eval ignores it; options such as f1's ``average`` are far from these)."""
    for key in entry:
        near = difflib.get_close_matches(str(key), _RESERVED, n=1, cutoff=0.8) if key not in _RESERVED else []
        if near:
            raise TaskError(
                f"{where}: metric {entry['metric']!r} has a key {key!r}; did you mean {near[0]!r}? Fix the key name."
            )


def _check_kwargs(fn: Callable[..., Any] | None, kwargs: Mapping[str, Any], name: str, where: str) -> bool:
    """Refuse a misspelt metric option instead of letting lm-eval's fallback call hide it,
    naming only the options the function does not take."""
    keyword = _accepts_keywords(fn, kwargs)
    if fn is not None and not keyword and kwargs and _accepts_keywords(fn, {}):
        params = [p for p in inspect.signature(fn).parameters if p not in ("references", "predictions")]
        unknown = [k for k in sorted(kwargs) if k not in params] or sorted(kwargs)
        hints = "".join(f" ('{k}': {closest(k, params, n=1)})" for k in unknown if params)
        raise TaskError(
            f"{where}: metric '{name}' does not take option(s) {', '.join(unknown)}{hints}; "
            f"it takes {', '.join(params) or 'no options'}. Fix or remove the key."
        )
    return keyword


def metric_for_key(
    specs: Iterable[MetricSpec], key: str, produced: Iterable[str], *, process_results: Any = None
) -> MetricSpec | None:
    """The spec a per-document key belongs to, for its aggregation and direction.

    A metric function may return a dict of several keys (``pass_at_k`` -> ``pass@1``); lm-eval then
    gives each key its source metric's aggregation. Evalflow's records keep only the values, so a
    key that names no metric is traced to the one metric that produced no key of its own name;
    when that is ambiguous (or the task has process_results) the key falls back to ``mean``, as
    lm-eval does for keys without an aggregation.
    """
    specs = tuple(specs)
    for spec in specs:
        if key in spec.output_names:
            return spec
    if process_results is not None:
        return None
    produced = set(produced)
    sources = [s for s in specs if s.fn is not None and s.name not in produced]
    return sources[0] if len(sources) == 1 else None
