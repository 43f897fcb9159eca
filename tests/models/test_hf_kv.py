"""Prefix sharing and packing on the tiny Llama: every path equals the plain one-request-at-a-time
computation within 1e-5, whatever the batch size, the request order or the chunking.

The request sets mimic real tasks: multiple-choice questions (one context, several choices: packed
trees), documents behind one long few-shot prefix (too big for a row: the prefix's key/values are
cached and reused, also across calls), rows cut by left truncation (plain path), and generation
after a shared prefix.

The comparisons run the tiny model in float64, so that 1e-5 tests the algorithm and not fp32
summation order (whose noise on this model's peaked log-probs, around -40, reaches 1e-5);
``test_fp32_paths_agree_to_float_noise`` covers float32 at a tolerance relative to the values.
"""

from __future__ import annotations

import dataclasses
import doctest
import random
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from evalflow.core.records import Request
from evalflow.models.hf import HFModel
from evalflow.models.hf.fast import kv, pack, prefix
from tests.support.hf_direct import assert_close, direct_pair, direct_score

WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "mat",
    "dog",
    "log",
    "Paris",
    "capital",
    "France",
    "Berlin",
    "Germany",
    "small",
    "model",
    "answered",
    "questions",
]


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def multiple_choice(rng: random.Random, docs: int, fewshot: str = "") -> list[Request]:
    out = []
    for _ in range(docs):
        ctx = f"{fewshot}Question: {sentence(rng, rng.randint(2, 9))}?\nAnswer:"
        out += [
            Request("loglikelihood", (ctx, " " + sentence(rng, rng.randint(1, 4)))) for _ in range(rng.randint(2, 5))
        ]
    return out


@pytest.fixture(scope="module")
def raw(tiny_model_dir: Path):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float64).eval()
    return model, AutoTokenizer.from_pretrained(tiny_model_dir)


def hf64(folder: Path, **kwargs) -> HFModel:
    return HFModel(str(folder), dtype="float64", **kwargs)


@pytest.fixture(scope="module")
def shared(tiny_model_dir: Path) -> HFModel:
    model = hf64(tiny_model_dir, batch_size=4)
    assert model.fast.share_prefixes, "the self-check must accept key/value reuse on a plain Llama"
    return model


def reference(raw, requests: list[Request], max_length: int = 10**9) -> list[tuple[float, bool]]:
    model, tok = raw
    return [direct_score(model, *direct_pair(tok, *r.args), max_length=max_length) for r in requests]


def test_module_examples():
    for module in (prefix, pack):
        assert doctest.testmod(module).failed == 0


def test_self_check_is_float_noise_on_a_plain_llama(shared):
    if kv.exact_keep_supported(shared.model):  # transformers 5: a boolean [batch, length] logits_to_keep
        assert kv.kv_reuse_error(shared.model, shared.device, exact_keep=True) < 1e-5
    assert kv.kv_reuse_error(shared.model, shared.device, exact_keep=False) < 1e-5


@pytest.mark.parametrize("seed", [0, 1])
def test_multiple_choice_trees_equal_one_request_at_a_time(shared, raw, seed):
    requests = multiple_choice(random.Random(seed), docs=12)
    assert_close(shared.loglikelihood(requests), reference(raw, requests))


def test_long_shared_prefix_uses_cached_key_values_and_the_memo_across_calls(shared, raw, monkeypatch):
    rng = random.Random(2)
    fewshot = "".join(f"Question: {sentence(rng, 6)}?\nAnswer: {sentence(rng, 2)}\n\n" for _ in range(3))
    requests = multiple_choice(rng, docs=24, fewshot=fewshot)
    runs: list[int] = []
    real = kv.prefix_states
    monkeypatch.setattr(kv, "prefix_states", lambda m, prefixes, d: runs.append(len(prefixes)) or real(m, prefixes, d))
    shared.fast.scoring.memo.clear()
    half = len(requests) // 2
    got = shared.loglikelihood(requests[:half]) + shared.loglikelihood(requests[half:])  # two chunks
    assert runs == [1]  # the few-shot prefix ran once; the second chunk found it in the memo
    assert_close(got, reference(raw, requests))


@pytest.mark.parametrize("batch_size", [1, 3, "auto"])
def test_results_do_not_depend_on_batch_size_order_or_chunking(tiny_model_dir, shared, batch_size):
    rng = random.Random(3)
    requests = multiple_choice(rng, docs=8) + multiple_choice(rng, docs=10, fewshot="The cat sat on the mat. " * 6)
    want = shared.loglikelihood(requests)
    other = hf64(tiny_model_dir, batch_size=batch_size)
    order = list(range(len(requests)))
    random.Random(4).shuffle(order)
    shuffled = [requests[i] for i in order]
    got = [x for start in range(0, len(shuffled), 7) for x in other.loglikelihood(shuffled[start : start + 7])]
    assert_close([got[order.index(i)] for i in range(len(requests))], want)
    other.fast = dataclasses.replace(other.fast, scoring=None)  # the plain passes
    assert_close(other.loglikelihood(requests), want)


def test_truncated_rows_run_whole_and_match_lm_eval_windows(tiny_model_dir, raw):
    short = hf64(tiny_model_dir, max_length=16, batch_size=4)
    ctx = "Once upon a time there was a small model that answered questions."
    requests = [Request("loglikelihood", (ctx, c)) for c in (" The end", " The cat sat", " Paris")]
    requests += multiple_choice(random.Random(5), docs=3)
    assert_close(short.loglikelihood(requests), reference(raw, requests, max_length=16))


def test_generation_after_a_shared_prefix_equals_the_plain_generation(tiny_model_dir, monkeypatch):
    fewshot = "Question: What is two plus two?\nAnswer: four\n\nQuestion: The cat sat on the mat?\nAnswer: yes\n\n"
    contexts = [fewshot + f"Question: {q}?\nAnswer:" for q in ("Paris is the capital of", "1 + 1", "A dog", "the log")]
    requests = [Request("generate_until", (c, {"until": ["\n\n"], "max_gen_toks": 12})) for c in contexts]
    plain = HFModel(str(tiny_model_dir), batch_size=3, prefix_sharing=False, batching="lmeval").generate_until(requests)
    real = kv.prefix_states
    for batch_size, batching in [(1, "lmeval"), (3, "lmeval"), (1, "continuous"), (3, "continuous")]:
        model = HFModel(str(tiny_model_dir), batch_size=batch_size, batching=batching)
        runs: list[int] = []
        monkeypatch.setattr(kv, "prefix_states", lambda m, p, d, runs=runs: runs.append(len(p)) or real(m, p, d))
        assert model.generate_until(requests) == plain
        assert runs == [1]  # one prefix for the whole group, found again by every later batch


def test_generation_cache_holds_exactly_the_plain_key_values(shared, raw):
    _, tok = raw
    contexts = [tok.encode("The cat sat on the mat"), tok.encode("Paris is"), tok.encode("A")]
    cache = kv.generation_cache(shared.model, contexts, 40, None, shared.device)
    padlen = max(map(len, contexts))
    for i, ctx in enumerate(contexts):
        with torch.inference_mode():
            out = shared.model(torch.tensor([ctx[:-1]]), use_cache=True) if len(ctx) > 1 else None
            own = (getattr(out, "cache", None) or out.past_key_values) if out is not None else None  # 5.x / 4.x name
        for layer, ref in zip(cache.layers, own.layers if own else []):
            got = layer.keys[i, :, padlen - len(ctx) :]
            assert torch.allclose(got, ref.keys[0], atol=1e-5)
            assert not layer.keys[i, :, : padlen - len(ctx)].any()  # padding columns are zero
    assert cache.get_seq_length() == padlen - 1


def test_a_failing_self_check_keeps_the_plain_path(tiny_model_dir, raw, monkeypatch):
    monkeypatch.setattr(kv, "kv_reuse_error", lambda *a: 0.5)
    model = hf64(tiny_model_dir, batch_size=2)
    assert not model.fast.share_prefixes
    requests = multiple_choice(random.Random(6), docs=3)
    assert_close(model.loglikelihood(requests), reference(raw, requests))
    monkeypatch.setattr(kv, "kv_reuse_error", lambda *a: (_ for _ in ()).throw(TypeError("no cache layers")))
    assert not HFModel(str(tiny_model_dir)).fast.share_prefixes


def test_fp32_paths_agree_to_float_noise(tiny_model_dir):
    rng = random.Random(8)
    requests = multiple_choice(rng, docs=6) + multiple_choice(rng, docs=12, fewshot="The cat sat on the mat. " * 6)
    packed = HFModel(str(tiny_model_dir), batch_size=4)
    plain = HFModel(str(tiny_model_dir), batch_size=4, prefix_sharing=False)
    for (a, ga), (b, gb) in zip(packed.loglikelihood(requests), plain.loglikelihood(requests), strict=True):
        assert a == pytest.approx(b, rel=1e-6, abs=1e-5) and ga == gb


def test_each_context_runs_once_per_question(shared, monkeypatch):
    """A question's context runs once, then each choice's own tokens (and the context's last token,
    whose logit scores the choice): far fewer tokens than lm-eval's one row per choice."""
    requests = multiple_choice(random.Random(7), docs=10)
    tokens = []
    real = kv.packed_logprobs
    monkeypatch.setattr(
        kv, "packed_logprobs", lambda m, rows, *a: tokens.append(sum(r.width for r in rows)) or real(m, rows, *a)
    )
    shared.loglikelihood(requests)
    pairs = [direct_pair(shared.tokenizer, *r.args) for r in requests]
    contexts = {tuple(c) for c, _ in pairs}
    rows = {tuple(c + x[:-1]): len(c) for c, x in pairs}  # choices with the same model input share a row
    expected = sum(len(c) - 1 for c in contexts) + sum(len(x) - n + 1 for x, n in rows.items())
    plain = sum(len(c) + len(x) - 1 for c, x in pairs)
    assert sum(tokens) == expected < 0.6 * plain


def test_long_rows_that_share_nothing_run_whole_without_a_mask(shared, raw, monkeypatch):
    from evalflow.models.hf import torch_ops
    from evalflow.models.hf.fast import shared_scoring

    monkeypatch.setattr(shared_scoring, "MIN_ROW_WIDTH", 12)
    whole: list[int] = []
    real = torch_ops.continuation_logprobs
    monkeypatch.setattr(
        torch_ops, "continuation_logprobs", lambda m, inputs, *a: whole.extend(map(len, inputs)) or real(m, inputs, *a)
    )
    text = "Paris is the capital of France. Berlin is the capital of Germany."
    requests = [Request("loglikelihood", ("", text)), Request("loglikelihood", ("A", " cat"))]
    assert_close(shared.loglikelihood(requests), reference(raw, requests))
    assert len(whole) == 1 and whole[0] >= 12  # the long lone row ran plain, the short one packed


def test_beam_search_keeps_transformers_cache(tiny_model_dir, monkeypatch):
    requests = [
        Request("generate_until", (c, {"until": ["\n"], "max_gen_toks": 6, "num_beams": 2}))
        for c in ("The cat", "Paris is")
    ]
    plain = HFModel(str(tiny_model_dir), batch_size=2, prefix_sharing=False).generate_until(requests)
    monkeypatch.setattr(kv, "generation_cache", lambda *a: pytest.fail("beam search must not get evalflow's cache"))
    assert HFModel(str(tiny_model_dir), batch_size=2).generate_until(requests) == plain
