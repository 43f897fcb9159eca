"""Per-document records in lm-eval's samples schema (``samples_<task>.jsonl``).

One line per document and filter pipeline: doc_id, doc, target, arguments
(``{"gen_args_0": {"arg_0": context, "arg_1": continuation}}``), resps, filtered_resps, filter,
metrics (the names), and one key per metric value.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterator, Mapping

from evalflow.taskspec.spec import TaskConfig


def sample_rows(task: TaskConfig, outputs: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    docs = outputs["load_docs"].docs
    instances = outputs["instances"]
    responses = outputs["inference"].values
    filtered = outputs["filters"]
    scores = outputs["metrics"]
    by_doc: dict[int, list[tuple[Any, Any]]] = defaultdict(list)
    for inst, answer in zip(instances, responses):
        by_doc[inst.doc_id].append((inst, answer))
    filtered_by_doc: dict[str, dict[int, list[Any]]] = {}
    for name, values in filtered.by_filter.items():
        per_doc: dict[int, list[Any]] = defaultdict(list)
        for (doc_id, _), value in zip(filtered.keys, values):
            per_doc[doc_id].append(value)
        filtered_by_doc[name] = per_doc
    for name, rows in scores.by_filter.items():
        for doc_id, target, metric_values in zip(scores.doc_ids, scores.targets, rows):
            pairs = by_doc[doc_id]
            yield {
                "doc_id": doc_id,
                "doc": docs[doc_id],
                "target": _jsonable(target),
                "arguments": {
                    f"gen_args_{i}": {f"arg_{j}": _jsonable(a) for j, a in enumerate(inst.request.args)}
                    for i, (inst, _) in enumerate(pairs)
                },
                "resps": [[_jsonable(answer)] for _, answer in pairs],
                "filtered_resps": [_jsonable(v) for v in filtered_by_doc[name][doc_id]],
                "filter": name,
                "metrics": sorted(metric_values),
                **{k: _jsonable(v) for k, v in metric_values.items()},
            }


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value
