"""What lm-eval 0.4.13's loggers (``lm_eval/loggers/wandb_logger.py``) make of a results dict and its
samples, as plain data (pure: no tracking client involved), so evalflow's W&B and Trackio loggers
log the same keys, tables and columns lm-eval's do.

    >>> summary_and_scores({"results": {"t": {"alias": "t", "acc,none": 0.5}}})
    ({'t/alias': 't'}, {'t/acc': 0.5})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_PERPLEXITY = ("word_perplexity", "byte_perplexity", "bits_per_byte")


def summary_and_scores(results: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """lm-eval's ``_sanitize_results_dict``: every ``results`` value as ``task/metric`` (``,none``
    dropped from the name); text values (aliases, an N/A stderr) go to the summary instead."""
    text: dict[str, str] = {}
    scores: dict[str, Any] = {}
    for task, entry in results.get("results", {}).items():
        for key, value in entry.items():
            name = f"{task}/{key[: -len(',none')] if key.endswith(',none') else key}"
            if isinstance(value, str):
                text[name] = value
            else:
                scores[name] = value
    return text, scores


def results_table_rows(results: Mapping[str, Any], key: str = "results") -> list[list[Any]]:
    """lm-eval's W&B results table: name, Version, Filter, num_fewshot, Metric, Value, Stderr (text,
    stderr to four places), one row per metric and filter; groups only in the ``groups`` table."""
    groups = set(results.get("groups", {}))
    rows = []
    for name, entry in results.get(key, {}).items():
        if name in groups and key != "groups":
            continue
        version = results.get("versions", {}).get(name)
        n = results.get("n-shot", {}).get(name)
        for metric_filter, value in entry.items():
            metric, _, filter_name = metric_filter.partition(",")
            if metric.endswith("_stderr") or metric == "alias":
                continue
            stderr = entry.get(f"{metric}_stderr,{filter_name}", "")
            shown = stderr if stderr in ("", "N/A") else f"{stderr:.4f}"
            rows.append([name, None if version == "N/A" else version, filter_name, n, metric, str(value), str(shown)])
    return rows


def arguments(sample: Mapping[str, Any]) -> list[list[Any]]:
    """A sample's request arguments as lm-eval holds them in memory (one list per request), from
    either that form or the samples file's ``{"gen_args_0": {"arg_0": ...}}``."""
    args = sample["arguments"]
    if isinstance(args, Mapping):
        return [list(a.values()) if isinstance(a, Mapping) else [a] for a in args.values()]
    return [list(a) for a in args]


def sample_columns(data: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    """lm-eval's ``_generate_dataset``: the columns of a task's samples table (id, data, choices for
    multiple choice, input_len, labels, output_type, raw and filtered predictions, each metric)."""
    kind = config["output_type"]
    args = [arguments(x) for x in data]
    instance = [a[0][0] for a in args]
    labels: list[Any] = [x["target"] for x in data]
    resps: list[Any]
    filtered: list[Any]
    if kind == "loglikelihood":
        labels = [a[0][1] for a in args]
        resps = [_greedy_text(x["resps"][0][0]) for x in data]
        filtered = [_greedy_text(x["filtered_resps"][0]) for x in data]
    elif kind == "multiple_choice":
        resps = [_argmax([n[0][0] for n in x["resps"]]) for x in data]
        filtered = [_argmax([n[0] for n in x["filtered_resps"]]) for x in data]
    else:
        resps = [x["resps"][0][0] for x in data]
        filtered = [x["filtered_resps"][0] for x in data]
    columns: dict[str, Any] = {"id": [x["doc_id"] for x in data], "data": instance}
    if kind == "multiple_choice":
        columns["choices"] = ["\n".join(f"{i}. {a[1]}" for i, a in enumerate(request)) for request in args]
    columns.update({"input_len": [len(x) for x in instance], "labels": labels, "output_type": kind})
    columns.update({"raw_predictions": resps, "filtered_predictions": filtered})
    for item in config.get("metric_list", []):
        metric = item.get("metric")
        if metric in _PERPLEXITY:
            columns[f"{metric}_loglikelihood"] = [x[metric][0] for x in data]
            columns[f"{metric}_{'words' if metric == 'word_perplexity' else 'bytes'}"] = [x[metric][1] for x in data]
        else:
            columns[metric] = [x[metric] for x in data]
    return columns


def _greedy_text(pair: Any) -> str:
    return (
        f"log probability of continuation is {pair[0]} \n\n"
        f"continuation will {'be' if pair[1] else 'not be'} generated with greedy sampling"
    )


def _argmax(values: list[float]) -> int:
    return max(range(len(values)), key=lambda i: (values[i], -i))


def trace_parts(sample: Mapping[str, Any], task: str, output_type: str) -> tuple[str, str, dict[str, Any]]:
    """lm-eval's ``_sample_to_trace`` (trackio_logger.py): a sample's prompt, the model's response as
    text, and the metadata its Trackio trace carries (task, doc_id, target, filter, each metric)."""
    args = arguments(sample) if sample.get("arguments") else []
    prompt = str(args[0][0]) if args and args[0] else ""
    filtered = sample.get("filtered_resps") or []
    if output_type == "loglikelihood":
        first = filtered[0] if filtered else None
        logprob, greedy = first if isinstance(first, (list, tuple)) else (first, None)
        response = (
            ""
            if first is None
            else f"continuation log-prob: {logprob}" + (f"\n\ngreedy={bool(greedy)}" if greedy is not None else "")
        )
    elif output_type == "multiple_choice":
        response = f"selected choice {_argmax([n[0] if isinstance(n, (list, tuple)) else n for n in filtered])}"
    else:
        answers = filtered or sample.get("resps") or []
        response = "" if not answers else answers[0] if isinstance(answers[0], str) else str(answers[0])
    metadata = {
        "task": task,
        "doc_id": sample.get("doc_id"),
        "target": sample.get("target"),
        "filter": sample.get("filter"),
        "output_type": output_type,
    }
    metadata.update({m: sample[m] for m in sample.get("metrics") or [] if m in sample})
    return prompt, response, metadata


def flat_scores(results: Mapping[str, Any]) -> dict[str, Any]:
    """lm-eval's Trackio scores: every numeric ``results`` value as ``task/metric`` (``,none`` dropped)."""
    return {k: v for k, v in summary_and_scores(results)[1].items() if isinstance(v, (int, float))}
