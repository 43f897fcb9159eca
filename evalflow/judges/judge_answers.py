"""The judge models' answers to the judge requests, each metric's through its own judge.

``judges`` maps each judge metric to its model edge, the same caching edge
(:class:`evalflow.scale.answer_cache.CachedModel`) the scored model answers through: per-request cache,
chunks persisted as they return (a killed run resumes), leases shared between processes, Ray
workers. :func:`ask_judges` is what the ``judge_inference`` stage runs: a plain function of the
requests, as the scored model's inference is.
"""

from __future__ import annotations

from collections.abc import Mapping

from evalflow.core.records import JudgeRequests, JudgeResponses, generation_text
from evalflow.errors import ModelError
from evalflow.models.protocol import AnswersRequests


def ask_judges(judge_requests: JudgeRequests, judges: Mapping[str, AnswersRequests]) -> JudgeResponses:
    """Each request's answer, in order, from its metric's judge (one list of requests per judge)."""
    answers: list[str] = [""] * len(judge_requests.items)
    for metric in dict.fromkeys(item.metric for item in judge_requests.items):
        positions = [i for i, item in enumerate(judge_requests.items) if item.metric == metric]
        requests = [judge_requests.items[i].request for i in positions]
        got = list(judges[metric].generate_until(requests))
        if len(got) != len(requests):
            raise ModelError(
                f"the judge of metric '{metric}' returned {len(got)} answers for {len(requests)} requests; "
                "a model must return exactly one response per request, in order"
            )
        for i, text in zip(positions, got):
            answers[i] = generation_text(text)
    return JudgeResponses(tuple(answers))
