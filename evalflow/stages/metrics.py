"""Stage 6: per document and filter pipeline, the metric values (acc, exact_match, ...).

A metric without ``reduction`` gets lm-eval 0.4.13's one value, from the pipeline's answer (the
first repeat's under ``take_first``). A metric with reductions is scored on every repeat's own
answer (``Filtered.by_sample``), and each reduction turns those k values into one result
(:mod:`evalflow.scoring.reductions`); the per-sample values are kept for the samples file.

Judge metrics (``judge:`` in metric_list) take their value from the judge stages' answers, parsed
here (:mod:`evalflow.judges.verdicts`): each answer scored (every repeat's too) gets its verdict.

Task code that draws from the global RNGs while scoring (mmmu's ``random.choice`` when an answer
names no option) finds them as lm-eval's run of this task alone would (:mod:`evalflow.taskspec.format.lmeval_seeds`):
seeded as lm-eval seeds them, then its modules' import effects and lm-eval's task-loading draws,
documents scored in lm-eval's order (filter pipelines outer, documents inner); the states are put
back afterwards, so a task's scores never depend on which other tasks ran.

Metrics that run model-written code (pass_at_k) run it through the sandbox backend the run names
(``code_sandbox``); it is set here for the duration of the stage, since metrics see no settings.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evalflow.core.records import DocSet, Filtered, JudgeRequests, JudgeResponses, Scores
from evalflow.errors import TaskError
from evalflow.judges.verdicts import Verdicts, verdicts_for
from evalflow.sandbox.current import using
from evalflow.scoring.metric_functions import MetricSpec, task_metric_specs
from evalflow.scoring.process import score_document
from evalflow.scoring.reductions import RepeatSamples
from evalflow.taskspec.format.lmeval_seeds import scoring_rng
from evalflow.taskspec.format.spec import TaskConfig
from evalflow.taskspec.format.taskcode import rng_effects
from evalflow.taskspec.prompts.fewshot_context import is_multiple_input
from evalflow.taskspec.prompts.templates import doc_to_choice, doc_to_target, doc_to_text


def metrics(
    task: TaskConfig,
    docs: DocSet,
    filtered: Filtered,
    code_sandbox: str,
    task_rng: Mapping[str, int],
    judge_requests: JudgeRequests | None = None,  # tasks with judge metrics only
    judge_responses: JudgeResponses | None = None,
) -> Scores:
    verdicts = verdicts_for(task, judge_requests, judge_responses)
    with using(code_sandbox), scoring_rng(rng_effects(task), task_rng):
        return _scores(task, docs, filtered, verdicts)


def _scores(task: TaskConfig, docs: DocSet, filtered: Filtered, verdicts: Verdicts) -> Scores:
    doc_ids = tuple(sorted({doc_id for doc_id, _ in filtered.keys}))
    targets = tuple(doc_to_target(task, docs.docs[d]) for d in doc_ids)
    choices = tuple(doc_to_choice(task, docs.docs[d]) if task.doc_to_choice is not None else None for d in doc_ids)
    # lm-eval's gold for multiple-input tasks (winogrande) is doc_to_text: the index of the right context.
    golds = tuple(doc_to_text(task, docs.docs[d]) for d in doc_ids) if is_multiple_input(task, docs) else targets
    # lm-eval decides "multiple targets" once per task, from the split's first document.
    multiple_target = isinstance(doc_to_target(task, docs.docs[0]), (list, tuple))
    specs = task_metric_specs(task)
    reduced = any(s.reductions for s in specs)
    by_filter: dict[str, tuple[dict[str, Any], ...]] = {}
    by_sample: dict[str, tuple[tuple[dict[str, Any], ...], ...]] = {}
    judged: dict[str, tuple[dict[str, Any], ...]] = {}
    for name, values in filtered.by_filter.items():
        answers = _per_doc(filtered.keys, values)
        samples = _per_doc(filtered.keys, _sample_answers(task, filtered, name)) if reduced else {}
        rows, sample_rows, judged_rows = [], [], []
        for d, gold, choice in zip(doc_ids, golds, choices):

            def score(results: Sequence[Any], d: int = d, gold: Any = gold, choice: Any = choice) -> dict[str, Any]:
                row = score_document(
                    task, docs.docs[d], list(results), target=gold, choices=choice, multiple_target=multiple_target
                )
                return {**row, **verdicts.values(d, results)}

            row = score(answers[d])
            if reduced:
                row, scored = reduce_document(specs, row, _by_repeat(samples[d]), score)
                sample_rows.append(scored)
            rows.append(row)
            if verdicts.specs:
                graded = [answers[d][0], *(a[0] for a in _by_repeat(samples[d]))] if reduced else [answers[d][0]]
                judged_rows.append(verdicts.details(d, graded))
        by_filter[name] = tuple(rows)
        if reduced:
            by_sample[name] = tuple(sample_rows)
        if verdicts.specs:
            judged[name] = tuple(judged_rows)
    return Scores(doc_ids=doc_ids, by_filter=by_filter, targets=targets, by_sample=by_sample, judged=judged)


def reduce_document(
    specs: Sequence[MetricSpec],
    row: Mapping[str, Any],
    answers: Sequence[tuple[Any, ...]],
    score: Callable[[Sequence[Any]], Mapping[str, Any]],
) -> tuple[dict[str, Any], tuple[dict[str, Any], ...]]:
    """One document's results: ``row`` (lm-eval's values) less the metrics that are reduced, plus
    each reduction's result; and each sample's metric values. ``answers[j]`` is sample j's answer
    (one value per instance of the document) and ``score(answer)`` its metric values."""
    scored = tuple(dict(score(answer)) for answer in answers)
    plain = {s.name for s in specs if not s.reductions}
    out = {k: v for k, v in row.items() if k in plain or not any(k == s.name for s in specs)}
    for spec in specs:
        if not spec.reductions:
            continue
        # a judge metric's samples whose judge answer did not parse (on_unparsed: exclude) have no value
        kept = [j for j, sample in enumerate(scored) if spec.judge is None or spec.name in sample]
        values = tuple(_value(scored[j], spec.name) for j in kept)
        samples = RepeatSamples(
            answers=tuple(answers[j] for j in kept), values=values, score=_metric_of(score, spec.name)
        )
        for reduction in spec.reductions:
            if len(kept) >= reduction.needs:  # else the document has no value for it (counted: `_excluded`)
                out[reduction.output_name(spec.name)] = reduction(samples)
    return out, scored


def _metric_of(score: Callable[[Sequence[Any]], Mapping[str, Any]], metric: str) -> Callable[[Any], Any]:
    """The value of ``metric`` for any answer (what maj@k scores its vote with)."""
    return lambda answer: _value(score(answer), metric)


def _sample_answers(task: TaskConfig, filtered: Filtered, name: str) -> tuple[tuple[Any, ...], ...]:
    """Per instance, each repeat's answer through pipeline ``name`` (one repeat: the pipeline's)."""
    if name in filtered.by_sample:
        return filtered.by_sample[name]
    if task.repeats > 1:
        raise TaskError(
            f"task '{task.task}' ({task.source or 'no file'}): metric_list asks for a reduction, which "
            f"scores each repeat on its own, but filter pipeline '{name}' combines repeats "
            "(majority_vote or take_first_k). Drop that pipeline or the reduction."
        )
    return tuple((v,) for v in filtered.by_filter[name])  # repeats: 1, so the sample is the answer


def _per_doc(keys: Sequence[tuple[int, int]], values: Sequence[Any]) -> dict[int, list[Any]]:
    """Values of instances grouped by document, in idx order (keys are sorted by (doc_id, idx))."""
    out: dict[int, list[Any]] = defaultdict(list)
    for (doc_id, _), value in zip(keys, values):
        out[doc_id].append(value)
    return out


def _by_repeat(instances: Sequence[Sequence[Any]]) -> tuple[tuple[Any, ...], ...]:
    """From per instance, per repeat to per repeat, per instance: sample j is one answer per instance."""
    return tuple(zip(*instances))


def _value(scores: Mapping[str, Any], metric: str) -> Any:
    if metric not in scores:
        raise TaskError(
            f"a reduction of metric '{metric}' needs its value per sample, but scoring a sample gave "
            f"only {sorted(scores)}; reduce a metric the task reports under its own name"
        )
    return scores[metric]
