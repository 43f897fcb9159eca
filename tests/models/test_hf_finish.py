"""How an HF generation ended (``stop``, ``eos``, ``length``) and its exact token counts, read back
from the generated ids the same way on both engines and in any batch; and lm-eval's HFLM rule for
thinking models: a stop sequence inside the thinking ends the generation."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from evalflow.core.records import Finish, Generation
from evalflow.models.hf import HFModel
from evalflow.models.hf.finish import generation_finish
from evalflow.stages.filters import without_thinking
from tests.support import peer_hflm
from tests.support.generation import gen
from tests.support.tiny_models import always_eos

CONTEXT = "The cat"
EOS = 9


def chars(ids: list[int]) -> str:
    """A decode of one character per id: ids 97.. spell letters, EOS spells "</s>"."""
    return "".join("</s>" if i == EOS else chr(i) for i in ids)


def new_at(text: str, start: int, length: int) -> str:
    """The first piece of ``text`` from ``start`` on that occurs nowhere before: a stop sequence
    (or marker) the generation first meets there."""
    return next(text[i : i + length] for i in range(start, len(text)) if text.index(text[i : i + length]) == i)


def ids(text: str) -> list[int]:
    return [ord(c) for c in text]


@pytest.mark.parametrize(
    ("tokens", "until", "expected"),
    [
        (ids("abcde"), ["x"], Finish("length", 4, 5)),  # no stop met, no EOS: the budget ended it
        (ids("ab") + [EOS, EOS, EOS], ["x"], Finish("eos", 4, 3)),  # EOS counted, the padding after it not
        (ids("abcxyz"), ["cx"], Finish("stop", 4, 4)),  # up to the stop sequence's last token
        (ids("abxy") + [EOS], ["bx", "</s>"], Finish("stop", 4, 3)),  # met before EOS: the batch ran on
        (ids("a</s>b"), ["</s>"], Finish("eos", 4, 5)),  # the EOS text spelled by ordinary tokens
        (ids("ab"), [], Finish("length", 4, 2)),
    ],
)
def test_a_rows_finish_from_its_tokens(tokens: list[int], until: list[str], expected: Finish) -> None:
    assert generation_finish(tokens, 4, until, {EOS}, "</s>", chars) == expected


@pytest.fixture(scope="module")
def raw(tiny_model_dir: Path) -> tuple[list[int], list[int]]:
    """The context's tokens and transformers' own 30 greedy tokens after it."""
    ref = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    context = tok.encode(CONTEXT)
    out = ref.generate(torch.tensor([context]), max_new_tokens=30, do_sample=False, pad_token_id=tok.eos_token_id)
    new = out[0, len(context) :].tolist()
    assert tok.eos_token_id not in new  # the random model never says EOS here: 30 tokens of text
    return context, new


@pytest.mark.parametrize("engine", ["reference", "fast"])
def test_length_stop_and_eos_with_exact_token_counts(tiny_model_dir: Path, raw, engine: str) -> None:
    context, new = raw
    model = HFModel(str(tiny_model_dir), engine=engine)
    tok = model.tokenizer
    text = tok.decode(new, skip_special_tokens=True)
    stop = text[8:10]
    # the stop's last token: the fewest generated tokens whose text holds it
    n = next(k for k in range(1, len(new) + 1) if stop in tok.decode(new[:k]))
    free, stopped, short = model.generate_until(
        [
            gen(CONTEXT, until=[], max_gen_toks=30),
            gen(CONTEXT, until=[stop], max_gen_toks=30),
            gen(CONTEXT, until=[], max_gen_toks=5),
        ]
    )
    assert free == Generation(text, Finish("length", len(context), 30))
    assert stopped == Generation(text.split(stop)[0], Finish("stop", len(context), n))
    assert short.finish == Finish("length", len(context), 5)
    always_eos(model)
    (ended,) = model.generate_until([gen(CONTEXT, until=["zzz"], max_gen_toks=30)])
    assert ended == Generation("", Finish("eos", len(context), 1))


def test_a_row_stopped_early_in_a_batch_counts_its_own_tokens(tiny_model_dir: Path, raw) -> None:
    """transformers runs a batch until its last row stops; a row that met its stop sequence early
    generates on, and those tokens are not its answer's: the same Finish as alone."""
    _, new = raw
    model = HFModel(str(tiny_model_dir), engine="reference", batch_size=2)
    stop = model.tokenizer.decode(new, skip_special_tokens=True)[4:6]
    requests = [gen(CONTEXT, until=[stop], max_gen_toks=30), gen("Once upon a time", until=[], max_gen_toks=30)]
    together = model.generate_until(requests)
    alone = [model.generate_until([r])[0] for r in requests]
    assert together == alone and together[0].finish.stop_reason == "stop"
    assert together[0].finish.completion_tokens < 30 == together[1].finish.completion_tokens


@pytest.mark.skipif(not peer_hflm.available(), reason=peer_hflm.SKIP_REASON)
def test_a_stop_sequence_inside_the_thinking_ends_the_generation_as_in_lm_evals_hflm(tiny_model_dir: Path) -> None:
    """lm-eval 0.4.13's HFLM hands ``until`` to its stopping criteria whether or not it has a
    ``think_end_token``, and cuts the thinking after generating (``postprocess_generated_text``):
    a stop met inside the thinking ends the answer there (the marker never came: an unclosed
    thinking part). evalflow's hf answer and filters stage give the same final answer."""
    model = HFModel(str(tiny_model_dir), engine="reference")
    (free,) = model.generate_until([gen(CONTEXT, until=[], max_gen_toks=30)])
    text = free.text
    early, marker, late = (new_at(text, start, 2) for start in (4, 14, 24))
    assert text.index(early) < text.index(marker) < text.index(late)
    cases = [[early], [late]]  # a stop inside the "thinking" (before the marker), one after it
    proc = peer_hflm.start(
        [
            {
                "model_args": {"pretrained": str(tiny_model_dir), "think_end_token": marker},
                "generate_until": [[CONTEXT, {"until": until, "max_gen_toks": 30}] for until in cases],
            }
        ]
    )
    ours = model.generate_until([gen(CONTEXT, until=until, max_gen_toks=30) for until in cases])
    (theirs,) = peer_hflm.finish(proc)
    assert [without_thinking(a.text, marker, until) for a, until in zip(ours, cases)] == theirs["generate_until"]
    inside, after = ours
    assert inside.text == text.split(early)[0] and inside.finish.stop_with(inside.text, marker) == "thinking_unclosed"
    assert after.finish.stop_with(after.text, marker) == "stop"


def test_a_cached_rerun_returns_the_same_finishes_without_the_model(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The Finish is part of the cached answer: the inference stage's second run, every answer a
    cache hit, reports the same stop reasons and token counts and never loads the model."""
    from evalflow.cache.store import CacheStore
    from evalflow.core.records import Instance
    from evalflow.scale.answer_cache import CachedModel
    from evalflow.stages.inference import inference

    requests = [gen(CONTEXT, until=[], max_gen_toks=6), gen(CONTEXT, until=["a"], max_gen_toks=30)]
    instances = tuple(Instance(i, 0, r) for i, r in enumerate(requests))

    def no_model() -> None:
        raise AssertionError("a fully cached run loaded the model")

    runs = []
    for load in (lambda: HFModel(str(tiny_model_dir)), no_model):
        store = CacheStore(tmp_path / "cache")
        try:
            runs.append(inference(instances, CachedModel(store, "tiny", load, on_chunk=None)))
        finally:
            store.close()
    first, again = runs
    assert again == first
    assert [f.stop_reason for f in first.finishes] == ["length", "stop"]
    assert first.finishes[0].completion_tokens == 6
