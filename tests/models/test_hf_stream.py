"""HFModel.answer_parts for generation: one decode loop fed chunk after chunk (``hf.stream``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalflow.models.hf import HFModel
from evalflow.models.hf.fast import decode
from evalflow.scale.dispatch import LocalDispatch
from tests.support.generation import gen, texts

TEXTS = [
    "Once upon a time there was a small model",
    "Paris is the capital of France. Berlin",
    "Question: What is",
    "The weather today",
    "1 + 1 =",
    "The cat",
    "A",
]


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> HFModel:
    return HFModel(str(tiny_model_dir), batch_size=3)


@pytest.fixture(scope="module")
def contexts(model) -> list[str]:
    """Longest first in tokens, as the edge orders its misses: each chunk fits the first's buffers."""
    return sorted(TEXTS, key=lambda text: -len(model.tok_encode(text)))


@pytest.fixture(scope="module")
def stops(model, contexts) -> list[str]:
    """Stop sequences that end the rows at different steps (so rows free at different times)."""
    free = texts(model.generate_until([gen(c, until=[], max_gen_toks=24) for c in contexts]))
    return sorted({text[4 + 3 * i : 6 + 3 * i] for i, text in enumerate(free) if len(text) > 12})


def whole(parts) -> dict[int, list[str]]:
    """``answer_parts``' parts gathered per chunk, each request answered exactly once."""
    got: dict[int, dict[int, str]] = {}
    for n, part in parts:
        assert not set(part) & set(got.get(n, {}))
        got.setdefault(n, {}).update(part)
    return {n: [texts[i] for i in range(len(texts))] for n, texts in got.items()}


def spy_rows(monkeypatch) -> dict[int, list[int]]:
    """Rows of each decode step, per loop (keyed by the loop's first layer)."""
    rows: dict[int, list[int]] = {}
    real = decode.SlotLayer.update

    def spy(self, keys, *args, **kwargs):
        rows.setdefault(id(self), []).append(keys.shape[0])
        return real(self, keys, *args, **kwargs)

    monkeypatch.setattr(decode.SlotLayer, "update", spy)
    return rows


def test_one_loop_spans_the_chunks_and_answers_are_unchanged(model, contexts, stops, monkeypatch):
    chunks = [[gen(c, until=stops, max_gen_toks=24) for c in contexts[i : i + 3]] for i in (0, 3, 6)]
    expected = [model.generate_until(chunk) for chunk in chunks]
    rows = spy_rows(monkeypatch)
    pulled: list[int] = []

    def source():
        for n, chunk in enumerate(chunks):
            pulled.append(n)
            yield chunk

    parts = []
    for n, part in model.answer_parts("generate_until", source()):
        parts.append((n, part))
        assert n in pulled and len(part) == 1  # each row as it stops
    answers = whole(parts)
    assert [answers[n] for n in range(3)] == expected
    loops = {len(steps) for steps in rows.values()}
    assert len(rows) == len(model.model.model.layers)  # one loop: one set of slot layers for all chunks
    assert len(loops) == 1
    steps = next(iter(rows.values()))
    assert steps.count(3) > len(steps) // 2  # full while any chunk had requests left
    assert steps[-1] < 3  # and drained once, at the end


def test_a_chunk_that_cannot_join_waits_for_the_loop_to_drain(model, contexts, stops, monkeypatch):
    chunks = [
        [gen(c, until=stops, max_gen_toks=24) for c in contexts[:3]],
        [gen(c, until=stops, max_gen_toks=12) for c in contexts[3:5]],  # another token budget
        [gen(c, until=stops, max_gen_toks=24) for c in contexts[5:]]
        + [gen("Hi", until=["."], max_gen_toks=5)],  # two groups
        [gen(c, until=stops, max_gen_toks=24) for c in contexts[:2]],
    ]
    expected = [model.generate_until(chunk) for chunk in chunks]
    rows = spy_rows(monkeypatch)
    answers = whole(model.answer_parts("generate_until", iter(chunks)))
    assert [answers[n] for n in range(4)] == expected
    assert len(rows) > len(model.model.model.layers)  # more than one loop


def test_local_dispatch_hands_back_each_answer_with_its_key_once(model, contexts, stops):
    chunks = [
        [(f"k{i}{j}", gen(c, until=stops, max_gen_toks=24)) for j, c in enumerate(contexts[i : i + 3])] for i in (0, 3)
    ]
    done = list(LocalDispatch(lambda: model).map("generate_until", iter(chunks)))
    got = {k: a for d in done for k, a in zip(d.keys, d.answers)}
    assert sum(len(d.keys) for d in done) == 6 and sum(d.chunks for d in done) == 2
    assert got == {
        k: a for chunk in chunks for k, a in zip([k for k, _ in chunk], model.generate_until([r for _, r in chunk]))
    }


def test_a_loop_with_fewer_requests_than_slots_allocates_only_their_rows(model, contexts, stops, monkeypatch):
    allocated: list[int] = []
    real = decode.SlotLayer._buffers

    def spy(self, like):
        fresh = self.key_buffer is None
        out = real(self, like)
        if fresh:
            allocated.append(out[0].shape[0])
        return out

    monkeypatch.setattr(decode.SlotLayer, "_buffers", spy)
    chunk = [gen(c, until=stops, max_gen_toks=24) for c in contexts[:2]]
    assert whole(model.answer_parts("generate_until", iter([chunk]))) == {0: model.generate_until(chunk)}
    assert set(allocated) == {2}  # batch_size 3, two requests, no further chunk: two rows, as without the stream
