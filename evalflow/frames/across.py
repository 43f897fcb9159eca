"""Across runs: the documents every run gets wrong, and the figures of the runs' reasoning work.

A document that every model of a sweep gets wrong is more often a wrong label or a broken prompt
than a hard question, so :func:`always_wrong` lists them per task with each run's answer beside
the target. :func:`reasoning_figures` gathers what each run recorded of its generations (the
manifest's ``generations``, ``tokens`` and ``cost``, written by :mod:`evalflow.output.generations`
and :mod:`evalflow.output.cost`): how many were cut off and by what, the thinking tokens, what they
cost per task, and the lines the run printed about them. Both read samples through their indexes
(:mod:`evalflow.frames.samples_index`), never a whole file per request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evalflow.frames.samples import SHOWN_CHARS, task_settings
from evalflow.frames.samples_index import SamplesIndex, samples_index
from evalflow.output.run_folder import Run

LISTED = 500  # documents listed per task at most (the count says how many there are)


def _index(run: Run, task: str) -> SamplesIndex:
    path = run.samples_files[task]
    return samples_index(path, task_settings(path.parent, path).fewshot_delimiter)


def always_wrong(runs: Sequence[tuple[str, Run]], limit: int = LISTED) -> dict[str, Any]:
    """Per task every run has samples of: the documents that every run scored 0 on the task's
    first 0/1 metric (``correct``), under the first filter all runs share, with the prompt, the
    target and each run's answer; at most ``limit`` documents listed per task (``count``: all)."""
    if not runs:
        return {"tasks": []}
    first = runs[0][1]
    tasks = [t for t in first.samples_files if all(t in run.samples_files for _, run in runs)]
    out = []
    for task in sorted(tasks):
        indexes = [(run_id, _index(run, task)) for run_id, run in runs]
        filters = [f for f in dict.fromkeys(indexes[0][1].filters.tolist()) if all(f in i.filters for _, i in indexes)]
        if not filters or any(i.correct_metric is None for _, i in indexes):
            continue
        wrong: set[int] | None = None
        for _, index in indexes:
            docs = set(index.doc_ids[(index.filters == filters[0]) & (index.correct == 0)].tolist())
            wrong = docs if wrong is None else wrong & docs
        listed = sorted(wrong or ())
        out.append(
            {
                "task": task,
                "filter": filters[0],
                "metric": indexes[0][1].correct_metric,
                "runs": len(indexes),
                "count": len(listed),
                "docs": [_wrong_doc(indexes, filters[0], doc_id) for doc_id in listed[:limit]],
            }
        )
    return {"tasks": out}


def _wrong_doc(indexes: list[tuple[str, SamplesIndex]], filter_name: str, doc_id: int) -> dict[str, Any]:
    answers = {}
    for run_id, index in indexes:
        row = index.row(doc_id, filter_name)
        answers[run_id] = index.answers[row][:SHOWN_CHARS] if row is not None else None
    index = indexes[0][1]
    row = index.row(doc_id, filter_name)
    assert row is not None  # every listed document is wrong, so present, in each run
    return {
        "doc_id": doc_id,
        "prompt": index.prompts[row][:SHOWN_CHARS],
        "target": index.targets[row][:SHOWN_CHARS],
        "answers": answers,
    }


def reasoning_figures(runs: Sequence[tuple[str, Run]]) -> dict[str, Any]:
    """Per run, what it recorded of its generations: per task the stop reasons, the truncated
    share, the tokens (the thinking ones as ``reasoning``) and their cost at the run's prices;
    the run's tokens and cost; and the lines its summary printed about them. A run that recorded
    none (lm-eval's, or one without generations) has no tasks and says why."""
    from evalflow.output.cost import cost_line, token_line
    from evalflow.output.run_summary import NATIVE
    from evalflow.output.truncation import truncation_lines

    out = []
    for run_id, run in runs:
        manifest: Mapping[str, Any] = run.manifest or {}
        generations: Mapping[str, Any] = manifest.get("generations") or {}
        cost = manifest.get("cost")
        tasks = [_task_figures(task, stats, cost) for task, stats in generations.items()]
        lines = [line for line in (token_line(manifest), cost_line(manifest)) if line] if manifest else []
        out.append(
            {
                "id": run_id,
                "model": run.model_name,
                "tokens": manifest.get("tokens"),
                "cost": cost,
                "tasks": tasks,
                "lines": lines + (truncation_lines(manifest, NATIVE.raise_cap) if generations else []),
                "note": None if tasks else _none_note(run),
            }
        )
    return {"runs": out}


def _task_figures(task: str, stats: Mapping[str, Any], cost: Mapping[str, Any] | None) -> dict[str, Any]:
    keys = ("generations", "truncated", "truncated_share", "stop_reasons", "unclosed_by", "max_gen_toks")
    tokens = stats.get("tokens") or {}
    return {
        "task": task,
        **{k: stats.get(k) for k in keys},
        "suggested_max_gen_toks": stats.get("suggested_max_gen_toks"),
        "tokens": tokens,
        "thinking_tokens": tokens.get("reasoning"),
        "score": stats.get("score"),
        "finished_score": stats.get("finished_score"),
        "cost": _task_cost(tokens, cost),
    }


def _task_cost(tokens: Mapping[str, Any], cost: Mapping[str, Any] | None) -> float | None:
    """The task's generations priced at the run's rates (None: the run had no prices)."""
    if not cost or not tokens.get("counted"):
        return None
    from evalflow.config.prices import Rate
    from evalflow.output.cost import dollars

    return dollars(tokens, Rate(**cost["per_million"]))


def _none_note(run: Run) -> str:
    if run.kind == "lm-eval":
        return "lm-eval's output records no stop reasons or token counts"
    return "no generations: the run's tasks score log-likelihoods, or it recorded no figures"
