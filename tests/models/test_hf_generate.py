"""HFModel.generate_until on the tiny Llama: stops, max_gen_toks, truncation, batching, sampling."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from evalflow.core.records import Request
from evalflow.errors import ConfigError, ModelError
from evalflow.models.hf import HFModel
from tests.support.generation import gen, texts
from tests.support.tiny_models import always_eos

CONTEXTS = [
    "The cat",
    "Paris is the capital of France. Berlin",
    "Question: What is",
    "1 + 1 =",
    "Once upon a time there was a small model",
    "A",
]


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> HFModel:
    return HFModel(str(tiny_model_dir), batch_size=4)


@pytest.fixture(scope="module")
def free_text(model) -> list[str]:
    """30 greedy tokens after each context with no stop sequence but EOS."""
    return texts(model.generate_until([gen(c, until=[], max_gen_toks=30) for c in CONTEXTS]))


def test_greedy_generation_matches_transformers_generate(tiny_model_dir, free_text):
    ref = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    for context, text in zip(CONTEXTS, free_text):
        ids = torch.tensor([tok.encode(context)])
        out = ref.generate(ids, max_new_tokens=30, do_sample=False, pad_token_id=tok.eos_token_id)
        assert text == tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)


@pytest.mark.parametrize("batch_size", [1, 3, "auto"])
def test_results_do_not_depend_on_batch_size_or_order(tiny_model_dir, free_text, batch_size):
    other = HFModel(str(tiny_model_dir), batch_size=batch_size)
    reqs = [gen(c, until=[], max_gen_toks=30) for c in reversed(CONTEXTS)]
    assert texts(other.generate_until(reqs)) == list(reversed(free_text))


def test_continuous_batching_lets_stopped_rows_leave_and_waiting_rows_join(tiny_model_dir, free_text, monkeypatch):
    from evalflow.models.hf.fast import decode

    until = sorted({text[4 + 3 * i : 6 + 3 * i] for i, text in enumerate(free_text) if len(text) > 12})
    requests = [gen(c, until=until, max_gen_toks=30) for c in CONTEXTS]
    expected = HFModel(str(tiny_model_dir), batch_size=1, batching="lmeval").generate_until(requests)
    assert len({len(t.text) for t in expected}) > 2  # rows stop at different times
    rows_per_step: dict[int, list[int]] = {}
    real = decode.SlotLayer.update

    def spy(self, keys, *args, **kwargs):
        rows_per_step.setdefault(id(self), []).append(keys.shape[0])
        return real(self, keys, *args, **kwargs)

    monkeypatch.setattr(decode.SlotLayer, "update", spy)
    generated: list[list[int]] = []
    real_greedy = decode.greedy_until
    monkeypatch.setattr(decode, "greedy_until", lambda *a: generated.extend(real_greedy(*a)) or generated)
    assert HFModel(str(tiny_model_dir), batch_size=2).generate_until(requests) == expected
    steps = next(iter(rows_per_step.values()))
    assert max(steps) == 2 and steps[-1] == 1  # two slots; the last row runs alone
    assert sum(steps) == sum(map(len, generated))  # no row computed a step after it stopped


def test_batching_setting_is_checked(tiny_model_dir):
    with pytest.raises(ConfigError, match="model.batching"):
        HFModel(str(tiny_model_dir), batching="vllm")


def test_text_is_cut_at_the_first_stop_sequence(model, free_text):
    text = free_text[0]
    stop_late, stop_early = text[14:16], text[6:8]
    assert stop_early not in text[:6]
    (one,) = texts(model.generate_until([gen(CONTEXTS[0], until=[stop_late], max_gen_toks=30)]))
    assert one == text.split(stop_late)[0]
    (two,) = texts(model.generate_until([gen(CONTEXTS[0], until=[stop_late, stop_early], max_gen_toks=30)]))
    assert two == text[: min(text.index(stop_late), text.index(stop_early))]
    (single,) = texts(model.generate_until([gen(CONTEXTS[0], until=stop_late, max_gen_toks=30)]))  # a bare string
    assert single == one


def test_requests_with_different_kwargs_in_one_call(model, free_text):
    stop = free_text[1][5:7]
    reqs = [gen(CONTEXTS[0], until=[], max_gen_toks=30), gen(CONTEXTS[1], until=[stop], max_gen_toks=30)]
    assert texts(model.generate_until(reqs)) == [free_text[0], free_text[1].split(stop)[0]]


def test_max_gen_toks_bounds_the_new_tokens(model, free_text, monkeypatch):
    (short,) = texts(model.generate_until([gen(CONTEXTS[2], until=[], max_gen_toks=4)]))
    assert free_text[2].startswith(short) and len(short) < len(free_text[2])
    aliased = texts(model.generate_until([gen(CONTEXTS[2], until=[], max_new_tokens=4)]))
    assert aliased == [short]


def test_default_max_gen_toks_comes_from_the_model_config(tiny_model_dir, free_text):
    capped = HFModel(str(tiny_model_dir), max_gen_toks=4)
    (short,) = texts(capped.generate_until([gen(CONTEXTS[2], until=[])]))
    assert free_text[2].startswith(short) and len(short) < len(free_text[2])


def test_context_is_left_truncated_to_leave_room_for_generation(tiny_model_dir):
    ref = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    small = HFModel(str(tiny_model_dir), max_length=20)
    context = "Once upon a time there was a small model that answered questions. The quick brown fox"
    ids = tok.encode(context)
    assert len(ids) > 15
    (text,) = texts(small.generate_until([gen(context, until=[], max_gen_toks=5)]))
    out = ref.generate(torch.tensor([ids[-15:]]), max_new_tokens=5, do_sample=False, pad_token_id=tok.eos_token_id)
    assert text == tok.decode(out[0, 15:], skip_special_tokens=True)
    with pytest.raises(ModelError, match="max_gen_toks"):
        small.generate_until([gen(context, until=[], max_gen_toks=20)])


def test_generation_stops_at_eos_by_default(tiny_nobos_dir, monkeypatch):
    from evalflow.models.hf import torch_ops

    m = HFModel(str(tiny_nobos_dir), batching="lmeval")
    eos = always_eos(m)
    calls = []
    real = torch_ops.generate_batch

    def spy(*args, **kwargs):
        calls.append((args[3], real(*args, **kwargs)))
        return calls[-1][1]

    monkeypatch.setattr(torch_ops, "generate_batch", spy)
    (text,) = texts(m.generate_until([gen("The cat", until=["zzz"], max_gen_toks=30)]))
    (stops, new_tokens) = calls[0]
    assert stops == ["zzz", "</s>"]  # the decoded EOS joins the task's stop sequences
    assert new_tokens[0] == [eos] and text == ""  # stopped right away; EOS is not in the text


def test_continuous_batching_stops_a_row_at_eos(tiny_nobos_dir, monkeypatch):
    from evalflow.models.hf.fast import decode

    m = HFModel(str(tiny_nobos_dir))
    eos = always_eos(m)
    calls = []
    real = decode.greedy_until

    def spy(model, jobs, slots, max_new, stop, *rest):
        calls.append((stop.stops, real(model, jobs, slots, max_new, stop, *rest)))
        return calls[-1][1]

    monkeypatch.setattr(decode, "greedy_until", spy)
    (text,) = texts(m.generate_until([gen("The cat", until=["zzz"], max_gen_toks=30)]))
    (stops, new_tokens) = calls[0]
    assert stops == ["zzz", "</s>"]
    assert new_tokens[0] == [eos] and text == ""


def test_sampling_is_seeded_per_request(model):
    kw = {"until": [], "max_gen_toks": 12, "do_sample": True, "temperature": 1.0}
    reqs = [Request("generate_until", (CONTEXTS[0], kw), repeat=k, seed=1234) for k in range(3)]
    state = torch.random.get_rng_state()
    first = texts(model.generate_until(reqs))
    assert torch.equal(state, torch.random.get_rng_state())  # the global RNG is left alone
    assert texts(model.generate_until(list(reversed(reqs)))) == list(reversed(first))
    assert len(set(first)) == 3  # repeats are distinct samples


def test_empty_context_without_bos_is_refused(tiny_nobos_dir, tiny_model_dir):
    with pytest.raises(ModelError, match="encodes to no tokens"):
        HFModel(str(tiny_nobos_dir)).generate_until([gen("", until=[], max_gen_toks=3)])
    (text,) = texts(HFModel(str(tiny_model_dir)).generate_until([gen("", until=[], max_gen_toks=3)]))  # BOS alone
    assert isinstance(text, str)
