"""HFModel.answer_parts: answers handed back per forward pass / decode row, each request exactly
once and equal to the whole-chunk answers, so the edge can save them as they come (issue 38)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from evalflow.core.records import Request
from evalflow.models.hf import HFModel
from evalflow.scale.dispatch import answered_parts
from tests.support.generation import gen

CONTEXTS = [
    "Question: What is two plus two?\nAnswer:",
    "Paris is the capital of",
    "The cat sat on",
    "1 + 1 =",
    "Once upon a time there was a small model that answered questions. " * 2,
    "A cat sat on the mat, and the dog",
]
CHOICES = [" four", " France.", " the mat", " 2", " The end", " sat"]


def ll_chunk(offset: int) -> list[Request]:
    """36 questions of 6 choices each: several packed rows, so several passes at 2 rows a pass."""
    contexts = [f"{c} {i + offset}" for i in range(6) for c in CONTEXTS]
    return [Request("loglikelihood", (c, x)) for c in contexts for x in CHOICES]


@pytest.fixture(scope="module", params=[True, False], ids=["shared", "plain"])
def model(request: pytest.FixtureRequest, tiny_model_dir: Path) -> HFModel:
    return HFModel(str(tiny_model_dir), batch_size=2, prefix_sharing=request.param)


def gathered(parts: Iterable[tuple[int, dict[int, Any]]]) -> tuple[dict[int, list[Any]], int]:
    """The parts per chunk, asserting each request is answered exactly once; and the part count."""
    got: dict[int, dict[int, Any]] = {}
    count = 0
    for n, part in parts:
        assert part and not set(part) & set(got.get(n, {}))
        got.setdefault(n, {}).update(part)
        count += 1
    return {n: [answers[i] for i in range(len(answers))] for n, answers in got.items()}, count


def test_loglikelihood_parts_cover_every_request_once_and_equal_the_whole_chunk(model: HFModel) -> None:
    chunks = [ll_chunk(0), ll_chunk(2)]
    expected = {n: model.loglikelihood(chunk) for n, chunk in enumerate(chunks)}
    answers, parts = gathered(model.answer_parts("loglikelihood", iter(chunks)))
    assert set(answers) == {0, 1} and [len(answers[n]) for n in (0, 1)] == [216, 216]
    for n in (0, 1):
        for got, want in zip(answers[n], expected[n]):
            assert got[1] == want[1] and got[0] == pytest.approx(want[0], abs=1e-5)
    assert parts > 2  # more than one pass a chunk: parts, not whole chunks


def test_generation_parts_are_each_row_and_equal_the_whole_chunk(model: HFModel) -> None:
    chunks = [
        [gen(c, until=["\n"], max_gen_toks=8) for c in CONTEXTS[:4]],
        [gen(c, until=["\n"], max_gen_toks=8) for c in CONTEXTS[4:]],
    ]
    expected = {n: model.generate_until(chunk) for n, chunk in enumerate(chunks)}
    answers, parts = gathered(model.answer_parts("generate_until", iter(chunks)))
    assert answers == expected
    assert parts == 6  # a part per row as it stops (greedy, continuous batching)


def test_rolling_stays_whole_chunk(model: HFModel) -> None:
    chunk = [Request("loglikelihood_rolling", (c,)) for c in CONTEXTS]
    answers, parts = gathered(model.answer_parts("loglikelihood_rolling", iter([chunk])))
    assert parts == 1 and answers[0] == pytest.approx(model.loglikelihood_rolling(chunk), abs=1e-4)


def test_the_edge_gets_every_answer_once_and_each_chunk_completes_once(model: HFModel) -> None:
    chunks = [[(f"c{n}r{i}", r) for i, r in enumerate(ll_chunk(n))] for n in range(3)]
    done = list(answered_parts(model, "loglikelihood", iter(chunks), "local", save_every=0.0))
    keys = [k for d in done for k in d.keys]
    assert sorted(keys) == sorted(k for chunk in chunks for k, _ in chunk)
    assert sum(d.chunks for d in done) == 3 and len(done) > 3  # saved part by part
