"""Reading an echo answer's scores without building every token's Python objects.

A log-likelihood answer echoes the whole prompt: per prompt token a text, an offset, a
log-probability and a ``top_logprobs`` mapping, of which a continuation's score needs only the
last few (``payloads.score_choice``: ``[ctxlen:-1]``). Parsing all of it with orjson makes a dict
per token, about two thirds of the parse, which is itself half of the served client's CPU per
request with a 1-token-per-character tokenizer (270 us of 540 for ~750 tokens). With msgspec
(in the ``api`` extra; without it, the whole answer is parsed as before) the answer is decoded
against a schema that keeps each ``top_logprobs`` entry as raw bytes, and only the
continuation's entries are parsed, by orjson as before; the values then go through
``payloads.score_choice`` itself, so the answer is the same one.

Anything the schema does not expect (no choices, a null ``logprobs``, entries that are not
mappings, a choice count that differs, an empty context) gives None: the caller parses the
answer whole and gets the usual answer or the usual error.

>>> body = b'{"choices": [{"index": 0, "text": "x", "logprobs": {"tokens": ["a", "b", "c"],'
>>> body += b' "token_logprobs": [null, -1.0, -0.5], "top_logprobs": [null, {"b": -1.0}, {"c": -0.5}]}}]}'
>>> scores(body, [1]) if msgspec is not None else [(-1.0, True)]
[(-1.0, True)]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from evalflow.models.api.payloads import score_choice

try:
    import msgspec
except ImportError:  # pragma: no cover - depends on the environment
    msgspec = None  # type: ignore[assignment]  # the optional api extra: None marks it absent


if msgspec is not None:

    class _Logprobs(msgspec.Struct):
        token_logprobs: msgspec.Raw
        top_logprobs: list[msgspec.Raw]

    class _Choice(msgspec.Struct):
        index: int
        logprobs: _Logprobs | None = None

    class _Answer(msgspec.Struct):
        choices: list[_Choice]

    _decode = msgspec.json.Decoder(_Answer).decode
    _FAILED: tuple[type[Exception], ...] = (msgspec.DecodeError, msgspec.ValidationError)


def scores(body: bytes, ctxlens: Sequence[int]) -> list[tuple[float, bool]] | None:
    """Each choice's ``(logprob, is_greedy)`` in prompt order, ``ctxlens[k]`` being prompt k's
    context length; None when msgspec is missing or the answer is not the expected shape."""
    if msgspec is None:
        return None
    try:
        answer = _decode(body)
    except _FAILED:
        return None
    if len(answer.choices) != len(ctxlens):
        return None
    out = []
    for choice, ctxlen in zip(sorted(answer.choices, key=lambda c: c.index), ctxlens):
        got = _score(choice, ctxlen)
        if got is None:
            return None
        out.append(got)
    return out


def _score(choice: Any, ctxlen: int) -> tuple[float, bool] | None:
    if choice.logprobs is None or ctxlen <= 0:
        return None
    values = orjson.loads(memoryview(choice.logprobs.token_logprobs))
    raw_tops = choice.logprobs.top_logprobs
    if not isinstance(values, list):
        return None
    needed = [orjson.loads(memoryview(raw)) for raw in raw_tops[ctxlen:-1]]
    if not all(isinstance(best, dict) and best for best in needed):
        return None
    # the entries outside the continuation are never read: placeholders keep the list's length
    tops: list[Any] = [None] * min(ctxlen, len(raw_tops)) + needed + [None] * (len(raw_tops) > ctxlen)
    return score_choice({"logprobs": {"token_logprobs": values, "top_logprobs": tops}}, ctxlen)
