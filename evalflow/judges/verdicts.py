"""The judge's verdicts, as the metrics stage reads them: each graded answer's score.

:class:`Verdicts` pairs the judge requests with the judge's answers and parses each once
(:func:`verdicts_for`, what the metrics stage calls). The metrics stage then asks, for a
document's answer (a pipeline's, or one sample's), the value of every judge metric: the parsed
score, the ``on_unparsed`` score, or no value at all (``exclude``: the key is left out of the
document's row, so the aggregate is over the parsed documents only, and a samples file shows no
value rather than a made-up 0).

    >>> from evalflow.judges.judge_spec import parse_judge
    >>> spec = parse_judge("ok", {"prompt": "{{ response }}", "parser": {"type": "number"}}, "demo")
    >>> v = Verdicts.of((spec,), ((("ok", 0, "4"), "Score: 5"), (("ok", 0, "5"), "no idea")))
    >>> v.values(0, ["4"]), v.values(0, ["5"])
    ({'ok': 5.0}, {})
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalflow.core.records import JudgeRequests, JudgeResponses
from evalflow.judges.judge_metrics import judge_specs
from evalflow.judges.judge_prompts import first_text
from evalflow.judges.judge_spec import JudgeSpec, judge_score
from evalflow.taskspec.format.spec import TaskConfig

Key = tuple[str, int, str]  # (metric, doc_id, response)


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
