"""``echo.scores`` (only the continuation's entries of an echo answer parsed) gives exactly what
parsing the whole answer and ``payloads.score_choice`` give, or None (then the caller does that)."""

from __future__ import annotations

import doctest
import random

import orjson
import pytest

from evalflow.models.api import echo, payloads

pytest.importorskip("msgspec")


def answer(rng: random.Random, lengths: list[int], greedy_every: int = 3) -> dict:
    """An echo answer of several prompts (choices shuffled), with unicode token texts and values
    that are or are not each position's top entry."""
    choices = []
    for index, n in enumerate(lengths):
        values = [None] + [round(-rng.random() * 5, rng.choice([1, 3, 17])) for _ in range(n)]
        tops = [None] + [
            {f't{k}é"]': v, "x": v - (0.5 if k % greedy_every else -0.5)} for k, v in enumerate(values[1:])
        ]
        choices.append(
            {
                "index": index,
                "text": "g",
                "logprobs": {
                    "tokens": [f"t{k}" for k in range(n + 1)],
                    "token_logprobs": values,
                    "top_logprobs": tops,
                    "text_offset": list(range(n + 1)),
                },
            }
        )
    rng.shuffle(choices)
    return {"id": "x", "object": "text_completion", "choices": choices}


def whole(body: bytes, ctxlens: list[int]) -> list[tuple[float, bool]]:
    return [
        payloads.score_choice(c, k) for c, k in zip(payloads.choices(orjson.loads(body), len(ctxlens), "u"), ctxlens)
    ]


@pytest.mark.parametrize("seed", range(20))
def test_the_same_scores_as_parsing_the_whole_answer(seed: int) -> None:
    rng = random.Random(seed)
    lengths = [rng.randint(1, 60) for _ in range(rng.randint(1, 4))]
    body = orjson.dumps(answer(rng, lengths, greedy_every=rng.choice([1, 2, 7])))
    ctxlens = [rng.randint(1, n + 2) for n in lengths]  # past the end too: no continuation tokens
    got = echo.scores(body, ctxlens)
    assert got == whole(body, ctxlens)
    assert [type(s) for s, _ in got] == [float] * len(got)


@pytest.mark.parametrize(
    "change",
    [
        lambda a: a.pop("choices"),
        lambda a: a["choices"][0].__setitem__("logprobs", None),
        lambda a: a["choices"][0]["logprobs"].__setitem__("top_logprobs", None),
        lambda a: a["choices"][0]["logprobs"]["top_logprobs"].__setitem__(-2, None),
        lambda a: a["choices"][0]["logprobs"]["top_logprobs"].__setitem__(-2, {}),
        lambda a: a["choices"].pop(),
    ],
)
def test_an_unexpected_shape_is_left_to_the_whole_parse(change) -> None:
    rng = random.Random(0)
    a = answer(rng, [5, 6])
    change(a)
    assert echo.scores(orjson.dumps(a), [2, 2]) is None


def test_not_json_and_an_empty_context_are_left_to_the_whole_parse() -> None:
    assert echo.scores(b"<html>busy</html>", [1]) is None
    assert echo.scores(orjson.dumps(answer(random.Random(1), [4])), [0]) is None


def test_docstring_example() -> None:
    result = doctest.testmod(echo)
    assert result.attempted > 0 and result.failed == 0


def test_without_msgspec_everything_is_parsed_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(echo, "msgspec", None)
    assert echo.scores(orjson.dumps(answer(random.Random(2), [4])), [1]) is None
