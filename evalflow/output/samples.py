"""Per-document records in lm-eval's samples schema (``samples_<task>.jsonl``).

One line per document and filter pipeline: doc_id, doc, target, arguments
(``{"gen_args_0": {"arg_0": context, "arg_1": continuation}}``), resps, filtered_resps, filter,
metrics (the names), lm-eval 0.4.13's ``doc_hash``, ``prompt_hash`` and ``target_hash`` (so tools
that join samples files by hash work on evalflow's), and one key per metric value.

With ``repeats > 1`` all k samples are shown: ``resps`` holds every answer (as in lm-eval), and
evalflow adds ``filtered_samples`` (per instance, each repeat through the pipeline on its own) and,
when the task reduces repeats (pass@k, maj@k, ...), ``sample_metrics`` (each repeat's metric values,
the inputs of the reductions whose results are the row's metric keys).

Judge metrics add ``judge`` (per metric, each graded answer: response, judge_output, score, parsed)
and ``judge_unparsed`` (per metric, the judge answers that did not parse).

Generations add ``finish`` beside ``resps`` (same nesting: per instance, per repeat): each answer's
``stop_reason`` (``stop``, ``eos``, ``length``, ``thinking_unclosed``, ``error``, or null when the model
did not say), ``prompt_tokens``, ``completion_tokens``, ``reasoning_tokens``, ``stopped_by`` (for
``thinking_unclosed``: the backend's own reason), ``thinking_closed`` (a served chat model that cuts
the thinking off with its own ``model.think_end_token``: whether the marker came) and ``reasoning``
(the reasoning text a server or that marker split off) when there is one.

A task with ``cluster_key`` adds ``cluster`` (the document's cluster id, :mod:`evalflow.taskspec.prompts.clusters`)
at the end of each line; lm-eval's keys are unchanged.

A samples file is a pure function of five stage outputs, so its text is an output node of the
pipeline (``samples`` in :data:`evalflow.dag.pipeline.OUTPUTS`: keyed by this module's code and
those stages' keys, cached beside them): a run whose stages all come from the cache copies the file
out instead of decoding every prompt, rebuilding every row and hashing every document again (on
5-shot mmlu, most of a fully cached run).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from evalflow.core.records import DocSet, Filtered, Finish, ImageRef, Instance, Responses, Scores
from evalflow.output.samples_json import indented_doc_json, row_json
from evalflow.taskspec.format.spec import TaskConfig
from evalflow.taskspec.prompts.clusters import cluster_ids

# the keys a samples line holds beside lm-eval's (see above; every other key is lm-eval's)
EVALFLOW_SAMPLE_KEYS: tuple[str, ...] = (
    "filtered_samples",
    "sample_metrics",
    "judge",
    "judge_unparsed",
    "finish",
    "cluster",
)


def samples_text(
    docs: DocSet,
    instances: Sequence[Instance],
    responses: Responses,
    filtered: Filtered,
    scores: Scores,
    think_end_token: str | None = None,
    task: TaskConfig | None = None,
) -> str:
    """The samples node: one JSON line per document and filter pipeline (with the task's
    ``cluster_key``, each line's ``cluster``: the document's cluster id)."""
    rows = sample_rows(docs, instances, responses, filtered, scores, think_end_token)
    clusters = cluster_ids(task, docs.docs) if task is not None else None
    if clusters is not None:
        rows = ({**row, "cluster": clusters[row["doc_id"]]} for row in rows)
    return "".join(row_json(row) + "\n" for row in rows)


def sample_rows(
    doc_set: DocSet,
    instances: Sequence[Instance],
    answered: Responses,
    filtered: Filtered,
    scores: Scores,
    think_end_token: str | None = None,
) -> Iterator[dict[str, Any]]:
    docs, responses = doc_set.docs, answered.values
    finishes = answered.finishes or (None,) * len(responses)
    # One lm-eval instance per (doc_id, idx): its arguments once, its answers over all repeats.
    by_doc: dict[int, dict[int, tuple[Any, list[Any]]]] = defaultdict(dict)
    finish_by_doc: dict[int, dict[int, list[Any]]] = defaultdict(lambda: defaultdict(list))
    ordered = sorted(zip(instances, responses, finishes), key=lambda p: (p[0].doc_id, p[0].idx, p[0].request.repeat))
    for inst, answer, finish in ordered:
        by_doc[inst.doc_id].setdefault(inst.idx, (inst, []))[1].append(answer)
        if finish is not None:
            finish_by_doc[inst.doc_id][inst.idx].append(finish_json(finish, answer, think_end_token))
    filtered_by_doc = {name: _group(filtered.keys, values) for name, values in filtered.by_filter.items()}
    samples_by_doc = {name: _group(filtered.keys, values) for name, values in filtered.by_sample.items()}
    for name, rows in scores.by_filter.items():
        per_sample = scores.by_sample.get(name)
        judged = scores.judged.get(name)
        for row, (doc_id, target, metric_values) in enumerate(zip(scores.doc_ids, scores.targets, rows)):
            pairs = [by_doc[doc_id][idx] for idx in sorted(by_doc[doc_id])]
            target = _jsonable(target)
            yield {
                "doc_id": doc_id,
                "doc": _jsonable(docs[doc_id]),
                "target": target,
                "arguments": {
                    f"gen_args_{i}": {f"arg_{j}": _jsonable(a) for j, a in enumerate(inst.request.args)}
                    for i, (inst, _) in enumerate(pairs)
                },
                "resps": [[_jsonable(a) for a in answers] for _, answers in pairs],
                "filtered_resps": [_jsonable(v) for v in filtered_by_doc[name][doc_id]],
                "filter": name,
                "metrics": sorted(metric_values),
                **lm_eval_hashes(docs[doc_id], pairs[0][0].request.args[0], target),
                **{k: _jsonable(v) for k, v in metric_values.items()},
                **({"filtered_samples": _jsonable(samples_by_doc[name][doc_id])} if name in samples_by_doc else {}),
                **({"sample_metrics": _jsonable(per_sample[row])} if per_sample else {}),
                **(_judge_entries(judged[row]) if judged else {}),
                **(
                    {"finish": [finish_by_doc[doc_id][idx] for idx in sorted(by_doc[doc_id])]}
                    if doc_id in finish_by_doc
                    else {}
                ),
            }


def finish_json(finish: Finish, text: str, think_end_token: str | None) -> dict[str, Any]:
    """A generation's ``finish`` entry: why it stopped (``thinking_unclosed`` derived with the run's
    marker), its token counts, and a served model's separate reasoning when there is one."""
    reason = finish.stop_with(text, think_end_token)
    out: dict[str, Any] = {
        "stop_reason": reason,
        "prompt_tokens": finish.prompt_tokens,
        "completion_tokens": finish.completion_tokens,
        "reasoning_tokens": finish.reasoning_tokens,
    }
    if reason != finish.stop_reason:  # thinking_unclosed: what the backend said ended it
        out["stopped_by"] = finish.stop_reason
    if finish.thinking_closed is not None:  # the model cut its thinking off with its own marker
        out["thinking_closed"] = finish.thinking_closed
    if finish.reasoning is not None:
        out["reasoning"] = finish.reasoning
    return out


def _judge_entries(judged: Mapping[str, Any]) -> dict[str, Any]:
    """Judge metrics: each graded answer with the judge's text and score, and per metric how many
    judge answers did not parse (the document's metric key is absent when none parsed and the
    policy is exclude)."""
    return {
        "judge": _jsonable(dict(judged)),
        "judge_unparsed": {metric: sum(1 for r in rows if not r["parsed"]) for metric, rows in judged.items()},
    }


def _group(keys: Any, values: Any) -> dict[int, list[Any]]:
    """Per document, the values of its instances (keys are sorted by (doc_id, idx))."""
    out: dict[int, list[Any]] = defaultdict(list)
    for (doc_id, _), value in zip(keys, values):
        out[doc_id].append(value)
    return out


def lm_eval_hashes(doc: Mapping[str, Any], prompt: str, target: Any) -> dict[str, str]:
    """lm-eval 0.4.13's hashes (``evaluator.evaluate``): sha256 of the document as JSON with
    ``indent=2``, of the first request's context, and of ``str(target)`` (a list target prints as
    Python's list repr, as in lm-eval)."""
    doc_text = indented_doc_json(doc)
    return {"doc_hash": _sha256(doc_text), "prompt_hash": _sha256(prompt), "target_hash": _sha256(str(target))}


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_LEAVES = frozenset({str, int, float, bool, type(None)})


def _jsonable(value: Any) -> Any:
    if type(value) in _LEAVES:  # most values: returned as they are, without the checks below
        return value
    if isinstance(value, ImageRef):
        return value.as_json()
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value
