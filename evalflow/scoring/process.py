"""Per-document scoring: lm-eval's ``ConfigurableTask.process_results``, one function per output type.

``results`` are the filtered responses of one document's lm-eval instances, in ``idx`` order:

- loglikelihood: ``[(ll, is_greedy)]``; multiple_choice: one ``(ll, is_greedy)`` per choice (then
  one unconditional pair per choice when ``acc_mutual_info`` is asked for);
- loglikelihood_rolling: ``[ll]``; generate_until: ``[text]`` (or ``[[texts]]`` without take_first).

A ``(ll, is_greedy)`` pair may be any 2-sequence (a cache round-trip turns tuples into lists)::

    >>> from evalflow.taskspec.format.spec import FunctionRef, TaskConfig
    >>> task = TaskConfig(task="demo", output_type="multiple_choice")
    >>> score_document(task, {}, [(-2.0, False), (-1.0, True)], target=1, choices=["no", "yes"])
    {'acc': 1.0, 'acc_norm': 1.0}
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from evalflow.errors import DataError, EvalflowError, TaskError
from evalflow.scoring import lazy_numpy as np
from evalflow.scoring.metric_functions import MetricSpec, task_metric_specs
from evalflow.taskspec.format.spec import FunctionRef, TaskConfig

log = logging.getLogger(__name__)

COMPUTED: Mapping[str, tuple[str, ...]] = {
    "loglikelihood": ("perplexity", "acc"),
    "loglikelihood_rolling": ("word_perplexity", "byte_perplexity", "bits_per_byte"),
    "multiple_choice": (
        "acc",
        "f1",
        "mcc",
        "acc_norm",
        "acc_bytes",
        "exact_match",
        "brier_score",
        "likelihood",
        "acc_mutual_info",
    ),
}
"""The metrics lm-eval 0.4.13's ``process_results`` computes for each output type but generate_until,
in the order it reports them: the only ones such a task without ``process_results`` gets. A
``metric_list`` entry of another name is never called and gets no value, in lm-eval and here;
:mod:`evalflow.run.load_checks` warns of it when the task is loaded."""


def score_document(
    task: TaskConfig,
    doc: Mapping[str, Any],
    results: Sequence[Any],
    *,
    target: Any,
    choices: list[str] | None,
    multiple_target: bool | None = None,
) -> dict[str, Any]:
    """The metric values of one document, for one filter pipeline.

    ``target`` is the gold as lm-eval's process_results takes it: ``doc_to_target(doc)``, except for
    multiple-input tasks (winogrande) where it is ``doc_to_text(doc)``, the index of the right
    context. ``choices`` is ``doc_to_choice(doc)``, or None when the task has no doc_to_choice.
    ``multiple_target`` is lm-eval's task-wide flag (the first document's target is a list); by
    default it is read from this document's target.
    """
    if task.process_results is not None:
        from evalflow.taskspec.prompts.templates import call_task_function

        values = call_task_function(
            task.process_results, doc, list(results), task=task, what="process_results", doc=doc
        )
        if not isinstance(values, Mapping):
            raise TaskError(
                f"task '{task.task}': process_results ({task.process_results}) returned "
                f"{type(values).__name__}, not a dict of metric name -> value"
            )
        return {str(k): _plain(v) for k, v in values.items()}
    if len(results) == 0:
        raise DataError(f"task '{task.task}': a document has no responses to score: {_short(doc)}")
    specs = task_metric_specs(task)
    names = [s.name for s in specs]
    many = isinstance(target, (list, tuple)) if multiple_target is None else multiple_target
    if task.output_type == "loglikelihood":
        return _loglikelihood(results, names)
    if task.output_type == "loglikelihood_rolling":
        return _rolling(results, target, names)
    if task.output_type == "multiple_choice":
        return _multiple_choice(task, doc, results, target, choices, names, many)
    try:
        return _generate(results, target, choices, specs, many)
    except EvalflowError:
        raise
    except Exception as exc:
        custom = [
            str(m["metric"])
            for m in task.metric_list or ()
            if isinstance(m, Mapping) and isinstance(m.get("metric"), FunctionRef)
        ]
        if not custom:
            raise  # a built-in metric failing is evalflow's bug: keep its traceback
        raise TaskError(
            f"task '{task.task}' ({task.source or 'no file'}), metric_list: the task's metric function "
            f"{', '.join(custom)} raised {type(exc).__name__}: {exc} on the document {_short(doc)}. Fix the "
            "function or the data; EVALFLOW_DEBUG=1 shows the traceback."
        ) from exc


def _loglikelihood(results: Sequence[Any], names: list[str]) -> dict[str, Any]:
    ll, is_greedy = results[0]
    return _asked("loglikelihood", {"perplexity": _plain(ll), "acc": int(is_greedy)}, names)


def _rolling(results: Sequence[Any], target: Any, names: list[str]) -> dict[str, Any]:
    (loglikelihood,) = results
    loglikelihood = _plain(loglikelihood)
    words = len(re.split(r"\s+", target))
    size = len(target.encode("utf-8"))
    weights = {"word_perplexity": words, "byte_perplexity": size, "bits_per_byte": size}
    return _asked("loglikelihood_rolling", {m: (loglikelihood, w) for m, w in weights.items()}, names)


def _asked(output_type: str, values: Mapping[str, Any], names: list[str]) -> dict[str, Any]:
    """The values of the metrics asked for among those ``output_type`` computes, in
    :data:`COMPUTED`'s order (``values`` holds each of them that was computed)."""
    return {m: values[m] for m in COMPUTED[output_type] if m in names}


def gold_index(target: Any, choices: list[str]) -> tuple[Any, bool]:
    """lm-eval's gold: an index, a list of indices, -100 marking one outside the choices; and
    whether one is outside (lm-eval logs it and scores the document: no answer can match it)."""
    if isinstance(target, (list, tuple)):
        golds = [i if i < len(choices) else -100 for i in target]
        return golds, -100 in golds
    gold: Any = target
    if isinstance(gold, int):
        gold = gold if gold < len(choices) else -100
    elif isinstance(gold, str):
        gold = choices.index(gold) if gold in choices else -100
    return gold, bool(gold == -100)


def _multiple_choice(
    task: TaskConfig,
    doc: Mapping[str, Any],
    results: Sequence[Any],
    target: Any,
    choices: list[str] | None,
    names: list[str],
    many: bool,
) -> dict[str, Any]:
    if choices is None:
        raise TaskError(f"task '{task.task}' is multiple_choice but has no doc_to_choice; add one")
    lls, is_greedy = (tuple(c) for c in zip(*[tuple(r) for r in results], strict=True))
    mutual = "acc_mutual_info" in names
    expected = 2 * len(choices) if mutual else len(choices)
    if len(lls) != expected:
        raise DataError(
            f"task '{task.task}': {len(lls)} loglikelihoods for {len(choices)} choices (expected "
            f"{expected}{' with acc_mutual_info' if mutual else ''}) in document {_short(doc)}"
        )
    unconditional = lls[len(choices) :] if mutual else ()
    lls = lls[: len(choices)]
    completion_len = np.array([float(len(c)) for c in choices])
    byte_length = np.array([float(len(c.encode("utf-8"))) for c in choices])
    with np.errstate(divide="ignore", invalid="ignore"):
        pred = int(np.argmax(lls))  # ties: the first maximum, as numpy
        pred_norm = int(np.argmax(lls / completion_len))
        pred_byte = int(np.argmax(lls / byte_length))
    gold, bad = gold_index(target, choices)
    if bad:
        log.warning("task %s: label index not within the available choices in document %s", task.task, _short(doc))
    if many:
        exact = int(any(is_greedy[i] if i != -100 else 0 for i in gold))
    else:
        exact = int(is_greedy[gold]) if gold != -100 else 0

    def hit(p: int) -> float:
        return 1.0 if (p in gold if many else p == gold) else 0.0

    values: dict[str, Any] = {
        "acc": hit(pred),
        "f1": (gold, pred),
        "mcc": (gold, pred),
        "acc_norm": hit(pred_norm),
        "acc_bytes": hit(pred_byte),
        "exact_match": exact,
        "brier_score": (gold, tuple(_softmax(lls).tolist())) if "brier_score" in names else None,
        "likelihood": (gold, tuple(_plain(x) for x in lls)),
    }
    if mutual:
        info = [c - u for c, u in zip(lls, unconditional, strict=True)]
        values["acc_mutual_info"] = 1.0 if int(np.argmax(info)) == gold else 0.0
    return _asked("multiple_choice", values, names)


def _softmax(x: Sequence[float]) -> np.ndarray:
    e_x = np.exp(np.asarray(x) - np.max(x))
    return e_x / e_x.sum()


def _generate(
    results: Sequence[Any], target: Any, choices: list[str] | None, specs: tuple[MetricSpec, ...], many: bool
) -> dict[str, Any]:
    gold = target
    result = results[0]
    if isinstance(result, tuple):
        result = list(result)
    names = [s.name for s in specs]
    if choices is not None:
        gold = choices[gold]  # doc_to_choice set: the target is an index into the choices
    elif many:
        gold = list(gold)
    elif type(gold) is not type(result) and not ("bypass" in names or isinstance(result, list)):
        gold = type(result)(gold)
    out: dict[str, Any] = {}
    for spec in specs:
        if spec.judge is not None:  # its value comes from the judge stages (evalflow.stages.judge_requests)
            continue
        if many:
            if not isinstance(gold, list):
                gold = [gold]
            if spec.name == "exact_match":
                # lm-eval rebinds `result` here, so later metrics of this document see the list too.
                result = [result for _ in range(len(gold))]
                score: Any = 1.0 if _call(spec, gold, result)["exact_match"] > 0.0 else 0.0
            else:
                scores = [_unwrap(_call(spec, [option], [result]), spec.name) for option in gold]
                score = 1.0 if any(scores) else 0.0
        else:
            score = _call(spec, [gold], [result])
        if isinstance(score, Mapping):
            out.update({str(k): _plain(v) for k, v in score.items()})
        else:
            out[spec.name] = _plain(score)
    return out


def _call(spec: MetricSpec, references: list[Any], predictions: list[Any]) -> Any:
    """lm-eval's two metric conventions: keywords (HF evaluate style), else one ``[gold, result]``."""
    if spec.fn is None:
        raise TaskError(f"metric '{spec.name}' has no function to compute it")
    if spec.keyword_call:
        return spec.fn(references=references, predictions=predictions, **spec.kwargs)
    return spec.fn([references[0], predictions[0]])


def _unwrap(score: Any, name: str) -> Any:
    return score[name] if isinstance(score, Mapping) else score


def _plain(value: Any) -> Any:
    """numpy scalars and arrays to Python values, so scores stay JSON data."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def _short(doc: Mapping[str, Any]) -> str:
    text = repr(dict(doc)) if isinstance(doc, Mapping) else repr(doc)
    return text if len(text) <= 200 else text[:197] + "..."
