"""Stage 4: the model's raw answer to every request.

``model`` is anything with lm-eval's three request types. At run time it is the caching edge
(:class:`evalflow.scale.answer_cache.CachedModel`), so this stage stays a plain function of requests.
A generation may come back as a :class:`~evalflow.core.records.Generation` (text and how it ended)
or a plain ``str``; the stage keeps the texts where lm-eval keeps them and the finishes beside them.
"""

from __future__ import annotations

from evalflow.core.records import REQUEST_TYPES, Finish, Generation, Instance, Responses
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
    return split_generations(answers)


def split_generations(answers: list[object]) -> Responses:
    """The answers with each generation's text in ``values`` (what filters and lm-eval's tools read)
    and its :class:`Finish` in ``finishes`` (a plain-text generation's: unknown)."""
    finishes = tuple(
        a.finish if isinstance(a, Generation) else Finish() if isinstance(a, str) else None for a in answers
    )
    values = tuple(a.text if isinstance(a, Generation) else a for a in answers)
    return Responses(values, finishes)
