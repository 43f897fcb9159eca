"""Per task: how its generations ended, what they cost in tokens, and what the truncated ones hide.

A generation cut at ``max_gen_toks`` in the middle of its thinking scores as a wrong answer, and
the score alone cannot tell a weak model from a starved one. So each task with generations gets,
beside lm-eval's numbers (results.json's ``generations``, the manifest, the printed summary):

- ``stop_reasons``: how many generations ended at a stop sequence, the end-of-sequence token,
  ``max_gen_toks``, inside a thinking part that never closed, with an error, or unknown (a model
  that returns plain strings);
- ``truncated_share``: the share that did not finish (``length`` or ``thinking_unclosed``);
- ``finished_score``: each metric aggregated over the documents whose generations all finished,
  as the task aggregates it (what the model scores when it is not cut off), beside ``score``, the
  task's value of the same metrics over every document;
- ``longest_finished_tokens``, ``max_gen_toks`` (the cap the truncated ones hit) and
  ``suggested_max_gen_toks`` (see :func:`suggested_cap`);
- ``tokens``: prompt, completion and reasoning tokens summed over the generations that report them
  (a local model's thinking part counted with its tokenizer: :mod:`evalflow.output.thinking_tokens`).

It is an output node of the pipeline (``generations`` in :data:`evalflow.dag.pipeline.OUTPUTS`),
keyed by the answers, the scores and the run's ``think_end_token``, never by the warning threshold:
changing the threshold re-runs nothing but the report.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from evalflow.core.records import STOP_REASONS, TRUNCATED, Finish, Instance, Responses, Scores, TaskResult
from evalflow.core.tokens import token_totals
from evalflow.output.thinking_tokens import CountTokens
from evalflow.scoring.task_aggregation import aggregate_task
from evalflow.taskspec.format.spec import TaskConfig

UNKNOWN = "unknown"  # the stop reason of a generation whose model did not report one


def generation_stats(
    task: TaskConfig,
    instances: Sequence[Instance],
    responses: Responses,
    scores: Scores,
    result: TaskResult,
    think_end_token: str | None = None,
    count_tokens: CountTokens | None = None,
) -> dict[str, Any] | None:
    """The node: the task's generation figures as plain data; None for a task without generations.
    ``count_tokens``: the local model's tokenizer count (output/thinking_tokens.py), for the
    thinking parts' tokens; None for a model that reports its own or none."""
    finishes = responses.finishes or (None,) * len(responses.values)
    ended = [
        (inst, str(text), finish if finish is not None else Finish())
        for inst, text, finish in zip(instances, responses.values, finishes)
        if inst.request.type == "generate_until"
    ]
    if not ended:
        return None
    if think_end_token and count_tokens is not None:
        ended = with_thinking_tokens(ended, think_end_token, count_tokens)
    reasons = [finish.stop_with(text, think_end_token) or UNKNOWN for _, text, finish in ended]
    truncated = [reason in TRUNCATED for reason in reasons]
    unfinished_docs = {inst.doc_id for (inst, _, _), cut in zip(ended, truncated) if cut}
    finished_tokens = [f.completion_tokens for (_, _, f), cut in zip(ended, truncated) if not cut]
    cap = _cap(ended, reasons)
    longest = max((n for n in finished_tokens if n is not None), default=None)
    counts = Counter(reasons)
    return {
        "generations": len(ended),
        "stop_reasons": {r: counts[r] for r in (*STOP_REASONS, UNKNOWN) if counts[r]},
        "truncated": sum(truncated),
        "truncated_share": sum(truncated) / len(ended),
        # thinking that never closed, by what ended it (a stop sequence inside the thinking is not a short cap)
        "unclosed_by": dict(
            Counter(f.stop_reason or UNKNOWN for (_, _, f), r in zip(ended, reasons) if r == "thinking_unclosed")
        ),
        "docs": len(scores.doc_ids),
        "finished_docs": len(scores.doc_ids) - len(unfinished_docs & set(scores.doc_ids)),
        "finished_score": finished_score(task, scores, unfinished_docs),
        "score": {key: v for key, v in result.metrics.items() if "_stderr," not in key},  # over every document
        "longest_finished_tokens": longest,
        "max_gen_toks": cap,
        "suggested_max_gen_toks": suggested_cap(cap, longest) if any(truncated) else None,
        "tokens": token_totals([f for _, _, f in ended]),
    }


def with_thinking_tokens(
    ended: list[tuple[Instance, str, Finish]], marker: str, count_tokens: CountTokens
) -> list[tuple[Instance, str, Finish]]:
    """Each generation whose text holds the marker and whose backend counted no reasoning, with the
    tokens of its thinking part (the text up to the last marker, the marker included) as its
    ``reasoning_tokens``; the tokenizer is loaded only when some generation thought."""
    at = [i for i, (_, text, f) in enumerate(ended) if marker in text and f.reasoning_tokens is None]
    if not at:
        return ended
    counts = count_tokens([ended[i][1][: ended[i][1].rindex(marker) + len(marker)] for i in at])
    out = list(ended)
    for i, n in zip(at, counts):
        inst, text, finish = out[i]
        out[i] = (inst, text, dataclasses.replace(finish, reasoning_tokens=n))
    return out


def finished_score(task: TaskConfig, scores: Scores, unfinished_docs: set[int]) -> dict[str, Any]:
    """Each metric (stderr aside) aggregated over the documents none of whose generations was cut
    off, as the task aggregates all of them; empty when no document finished."""
    keep = [i for i, doc_id in enumerate(scores.doc_ids) if doc_id not in unfinished_docs]
    if not keep:
        return {}
    if len(keep) == len(scores.doc_ids):
        subset = scores.by_filter
    else:
        subset = {name: tuple(rows[i] for i in keep) for name, rows in scores.by_filter.items()}
    values, _ = aggregate_task(task, subset, bootstrap_iters=0)
    return {key: value for key, value in values.items() if "_stderr," not in key}


def _cap(ended: Sequence[tuple[Instance, str, Finish]], reasons: Sequence[str]) -> int | None:
    """The ``max_gen_toks`` the generations ran under: what the ones stopped at ``length`` used, else
    the largest the requests asked for (None: the model's default, unrecorded)."""
    hit = [f.completion_tokens for (_, _, f), r in zip(ended, reasons) if f.stop_reason == "length"]
    if any(n is not None for n in hit):
        return max(n for n in hit if n is not None)
    asked = [
        inst.request.args[1].get("max_gen_toks") for inst, _, _ in ended if isinstance(inst.request.args[1], Mapping)
    ]
    numbers = [int(n) for n in asked if isinstance(n, int)]
    return max(numbers) if numbers else None


def suggested_cap(cap: int | None, longest_finished: int | None) -> int | None:
    """The ``max_gen_toks`` to try next: the smallest power of two at least twice the larger of the
    cap and the longest finished generation. A truncated generation is known only to be longer
    than the cap, so doubling is the least step that lets the next run see how long it really is."""
    base = max(n for n in (cap, longest_finished, 0) if n is not None)
    if base <= 0:
        return None
    target = 2 * base
    return 1 << (target - 1).bit_length()
