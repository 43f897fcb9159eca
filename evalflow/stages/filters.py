"""Stage 5: each named filter pipeline applied to the responses (answer extraction, voting, ...)."""

from __future__ import annotations

from collections import defaultdict

from evalflow.records import DocSet, Filtered, Instance, Responses
from evalflow.scoring.filters import build_pipelines
from evalflow.taskspec.spec import TaskConfig


def filters(task: TaskConfig, docs: DocSet, instances: tuple[Instance, ...], responses: Responses) -> Filtered:
    # lm-eval's instance is one (doc_id, idx); its responses are those of all its repeats.
    grouped: dict[tuple[int, int], list[object]] = defaultdict(list)
    for inst, answer in sorted(zip(instances, responses.values), key=lambda p: p[0].request.repeat):
        grouped[(inst.doc_id, inst.idx)].append(answer)
    keys = tuple(sorted(grouped))
    resps = [grouped[k] for k in keys]
    rows = [docs.docs[doc_id] for doc_id, _ in keys]
    by_filter = {p.name: tuple(p.apply(resps, rows)) for p in build_pipelines(task.filter_list)}
    return Filtered(keys=keys, by_filter=by_filter)
