"""Stage 5: each named filter pipeline applied to the responses (answer extraction, voting, ...).

With ``repeats > 1`` and a metric that asks for a ``reduction``, each pipeline also runs on every
repeat alone (``Filtered.by_sample``), the answers that the reductions (pass@k, maj@k, mean, ...)
score; a pipeline that itself combines repeats (``majority_vote``, ``take_first_k``) has no
per-sample answers. Without a reduction the pipelines see only what lm-eval gives them, all of an
instance's repeats at once: a custom filter written for that need not handle a single repeat.

Reasoning models: with ``think_end_token`` set, a generation's text up to the last end-of-thinking
marker is the thinking part. It stays in the cached raw response (and the samples' ``resps``), and
only the rest, cut again at the request's stop sequences, reaches the filters and metrics, as
lm-eval's ``postprocess_generated_text`` does. Changing the marker re-runs scoring, not inference.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from evalflow.core.records import DocSet, Filtered, Instance, Responses
from evalflow.scoring.filter_functions import combines_samples, per_sample, task_pipelines
from evalflow.taskspec.format.spec import TaskConfig


def filters(
    task: TaskConfig,
    docs: DocSet,
    instances: tuple[Instance, ...],
    responses: Responses,
    think_end_token: str | None,
) -> Filtered:
    # lm-eval's instance is one (doc_id, idx); its responses are those of all its repeats.
    grouped: dict[tuple[int, int], list[Any]] = defaultdict(list)
    for inst, answer in sorted(zip(instances, responses.values), key=lambda p: p[0].request.repeat):
        if think_end_token and inst.request.type == "generate_until":
            answer = without_thinking(answer, think_end_token, inst.request.args[1].get("until"))
        grouped[(inst.doc_id, inst.idx)].append(answer)
    keys = tuple(sorted(grouped))
    resps = [grouped[k] for k in keys]
    rows = [docs.docs[doc_id] for doc_id, _ in keys]
    pipelines = task_pipelines(task)
    by_filter = {p.name: tuple(p.apply(resps, rows)) for p in pipelines}
    # Every repeat through each pipeline on its own when some metric reduces repeats, whichever
    # reductions they are (the stage sees only that marker: switching reductions never re-runs it).
    reduced = any("reduction" in m for m in task.metric_list or ())
    repeated = reduced and any(len(r) > 1 for r in resps)
    by_sample = {p.name: per_sample(p, resps, rows) for p in pipelines if repeated and not combines_samples(p)}
    return Filtered(keys=keys, by_filter=by_filter, by_sample=by_sample)


def without_thinking(text: str, think_end_token: str, until: Any) -> str:
    """The answer after the thinking part, cut at the first stop sequence (lm-eval's order)."""
    text = text.split(think_end_token)[-1].lstrip()
    for stop in [until] if isinstance(until, str) else (until or ()):
        if stop:
            text = text.split(stop)[0]
    return text
