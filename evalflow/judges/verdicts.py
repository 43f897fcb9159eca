"""The judge's verdicts, as the metrics and aggregate stages read them: each graded answer's score.

:class:`Verdicts` pairs the judge requests with the judge's answers and parses each once
(:func:`verdicts_for`, what the metrics stage calls). The metrics stage then asks, for a
document's answer (a pipeline's, or one sample's), the value of every judge metric: the parsed
score, the ``on_unparsed`` score, or no value at all (``exclude``: the key is left out of the
document's row, so the aggregate is over the parsed documents only, and a samples file shows no
value rather than a made-up 0). The aggregate stage adds what the aggregate of judge metrics
lacks, made explicit (:func:`judge_results`).

    >>> from evalflow.judges.judge_spec import parse_judge
    >>> spec = parse_judge("ok", {"prompt": "{{ response }}", "parser": {"type": "number"}}, "demo")
    >>> v = Verdicts.of((spec,), ((("ok", 0, "4"), "Score: 5"), (("ok", 0, "5"), "no idea")))
    >>> v.values(0, ["4"]), v.values(0, ["5"])
    ({'ok': 5.0}, {})
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evalflow.core.records import JudgeRequests, JudgeResponses, Scores
from evalflow.judges.judge_metrics import judge_specs
from evalflow.judges.judge_prompts import first_text
from evalflow.judges.judge_spec import JudgeSpec, judge_score
from evalflow.taskspec.format.spec import TaskConfig

Key = tuple[str, int, str]  # (metric, doc_id, response)


class ScoredMetric(Protocol):
    """What the judges read of a resolved ``metric_list`` entry (scoring's ``MetricSpec``): whether it
    is a judge metric, the results it reports, and whether a reduction makes them."""

    @property
    def judge(self) -> JudgeSpec | None: ...

    @property
    def output_names(self) -> tuple[str, ...]: ...

    @property
    def reductions(self) -> Sequence[object]: ...


@dataclass(frozen=True)
class Verdict:
    judge_output: str
    score: float | None  # None: no value (unparsed, on_unparsed: exclude)
    parsed: bool


@dataclass(frozen=True)
class Verdicts:
    specs: tuple[JudgeSpec, ...] = ()
    table: Mapping[Key, Verdict] = field(default_factory=dict)

    @classmethod
    def of(cls, specs: Sequence[JudgeSpec], answered: Iterable[tuple[Key, str]]) -> Verdicts:
        by_name = {s.metric: s for s in specs}
        table = {}
        for key, text in answered:
            score, parsed = judge_score(by_name[key[0]], text)
            table[key] = Verdict(text, score, parsed)
        return cls(tuple(specs), table)

    def values(self, doc_id: int, results: Sequence[Any]) -> dict[str, float]:
        """The judge metrics' values for one answer of document ``doc_id`` (``results``: one value
        per instance, as score_document takes them)."""
        if not self.specs or not results:
            return {}
        text = first_text(results[0])
        out = {}
        for spec in self.specs:
            verdict = self.table[(spec.metric, doc_id, text)]
            if verdict.score is not None:
                out[spec.metric] = verdict.score
        return out

    def details(self, doc_id: int, answers: Iterable[Any]) -> dict[str, tuple[dict[str, Any], ...]]:
        """Per judge metric, each distinct graded answer of the document with the judge's text and
        score (the samples file's ``judge`` entry)."""
        texts = list(dict.fromkeys(first_text(a) for a in answers))
        out = {}
        for spec in self.specs:
            rows = []
            for text in texts:
                v = self.table[(spec.metric, doc_id, text)]
                rows.append({"response": text, "judge_output": v.judge_output, "score": v.score, "parsed": v.parsed})
            out[spec.metric] = tuple(rows)
        return out


def verdicts_for(task: TaskConfig, requests: JudgeRequests | None, responses: JudgeResponses | None) -> Verdicts:
    """The verdicts the metrics stage scores ``task``'s answers with: the judge stages' requests and
    answers, parsed by each judge metric's parser (none for a task without judge metrics)."""
    specs = judge_specs(task)
    if not specs or requests is None or responses is None:
        return Verdicts()
    answered = (((i.metric, i.doc_id, i.response), text) for i, text in zip(requests.items, responses.values))
    return Verdicts.of(specs, answered)


def judge_results(specs: Sequence[ScoredMetric], scores: Scores) -> tuple[dict[str, Any], dict[str, bool]]:
    """What the aggregate stage adds for judge metrics: the values (:func:`judge_gaps`, then
    :func:`unparsed_counts`) and the direction of the counts among them (fewer is better)."""
    gaps, unparsed = judge_gaps(specs, scores), unparsed_counts(scores)
    counts = [*unparsed, *(key for key in gaps if key.split(",", 1)[0].endswith("_excluded"))]
    return {**gaps, **unparsed}, {key.split(",", 1)[0]: False for key in counts}


def unparsed_counts(scores: Scores) -> dict[str, int]:
    """``{"<metric>_unparsed,<filter>": n}``: judge answers that did not parse, per metric and filter."""
    out: dict[str, int] = {}
    for name, docs in scores.judged.items():
        for judged in docs:
            for metric, rows in judged.items():
                key = f"{metric}_unparsed,{name}"
                out[key] = out.get(key, 0) + sum(1 for r in rows if not r["parsed"])
    return out


def judge_gaps(specs: Sequence[ScoredMetric], scores: Scores) -> dict[str, Any]:
    """What the aggregate of judge metrics lacks, made explicit (``on_unparsed: exclude`` leaves a
    document without a value, and an aggregate over no document is not computed at all):

    - a result no document has a value for (every verdict unparsed) is still reported, as
      ``None`` (null in results.json) with stderr ``N/A``, so it cannot vanish from a run;
    - a reduction's result gets ``<result>_excluded,<filter>``: the documents left out of it
      (every sample unparsed, or fewer than k parsed for pass@k / maj@k).
    """
    out: dict[str, Any] = {}
    for spec in specs:
        if spec.judge is None or spec.judge.on_unparsed is not None:
            continue
        for name, rows in scores.by_filter.items():
            for result in spec.output_names:
                lacking = sum(1 for row in rows if result not in row)
                if rows and lacking == len(rows):
                    out[f"{result},{name}"], out[f"{result}_stderr,{name}"] = None, "N/A"
                if spec.reductions:
                    out[f"{result}_excluded,{name}"] = lacking
    return out
