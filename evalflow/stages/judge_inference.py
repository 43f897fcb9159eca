"""Stage 5c (tasks with judge metrics): the judge models' answers to the judge requests.

``judges`` maps each judge metric to its model edge, the scored model's caching edge
(:mod:`evalflow.scale.answer_cache`); the judges' room asks them
(:func:`evalflow.judges.judge_answers.ask_judges`), so this stage is a plain function of the requests.
"""

from __future__ import annotations

from collections.abc import Mapping

from evalflow.core.records import JudgeRequests, JudgeResponses
from evalflow.judges.judge_answers import ask_judges
from evalflow.models.protocol import AnswersRequests


def judge_inference(judge_requests: JudgeRequests, judges: Mapping[str, AnswersRequests]) -> JudgeResponses:
    return ask_judges(judge_requests, judges)
