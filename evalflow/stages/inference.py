"""Stage 4: the model's raw answer to every request.

``model`` is anything with lm-eval's three request types. At run time it is the caching edge
(:class:`evalflow.scale.answer_cache.CachedModel`), so this stage stays a plain function of requests.
"""

from __future__ import annotations

from evalflow.core.records import REQUEST_TYPES, Instance, Responses
from evalflow.errors import ModelError
from evalflow.models.protocol import AnswersRequests


def inference(instances: tuple[Instance, ...], model: AnswersRequests) -> Responses:
    answers: list[object] = [None] * len(instances)
    for rtype in REQUEST_TYPES:
        positions = [i for i, inst in enumerate(instances) if inst.request.type == rtype]
        if not positions:
            continue
        requests = [instances[i].request for i in positions]
        got = list(getattr(model, rtype)(requests))
        if len(got) != len(requests):
            raise ModelError(
                f"the model answered {len(got)} {rtype} requests with {len(got)} responses for "
                f"{len(requests)} requests; a model must return exactly one response per request, in order"
            )
        for i, answer in zip(positions, got):
            answers[i] = answer
    return Responses(tuple(answers))
