"""The decode step's attention: grouped queries read each key/value head once; a prefix every row
shares is read once and merged by log-sum-exp."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from evalflow.models.hf import HFModel
from evalflow.models.hf.fast import decode, kv, shared_attention
from tests.support.generation import FEW_SHOT, gen

QUESTIONS = ["Question: The cat", "Question: Paris is the capital of", "Question: 3 + 3 =", "Question: Once upon"]


def test_split_attention_equals_attention_over_the_concatenation():
    torch.manual_seed(0)
    rows, heads, kv_heads, dim, prefix_len, own = 3, 6, 2, 8, 11, 5
    query = torch.randn(rows, heads, 1, dim)
    prefix_k, prefix_v = torch.randn(1, kv_heads, prefix_len, dim), torch.randn(1, kv_heads, prefix_len, dim)
    own_k, own_v = torch.randn(rows, kv_heads, own, dim), torch.randn(rows, kv_heads, own, dim)
    filled = torch.tensor([5, 2, 4])  # each row's own columns; the rest are stale and masked
    visible = torch.arange(own)[None, :] < filled[:, None]
    mask = torch.zeros(rows, 1, 1, own).masked_fill_(~visible[:, None, None], torch.finfo(torch.float32).min)
    states = kv.PrefixStates((prefix_k,), (prefix_v,), (prefix_len,))
    got, _ = shared_attention.attention(
        SimpleNamespace(layer_idx=0), query, own_k, own_v, mask, scaling=0.3, shared_prefix=states
    )
    for r in range(rows):
        keys = torch.cat([prefix_k[0], own_k[r, :, : filled[r]]], dim=1).repeat_interleave(heads // kv_heads, dim=0)
        values = torch.cat([prefix_v[0], own_v[r, :, : filled[r]]], dim=1).repeat_interleave(heads // kv_heads, dim=0)
        weights = torch.softmax(query[r] @ keys.transpose(-1, -2) * 0.3, dim=-1)
        assert torch.allclose(got[r, 0], (weights @ values)[:, 0], atol=1e-6)


def test_grouped_queries_equal_attention_over_repeated_key_value_heads():
    """Without a shared prefix: each query head against its own kv head (h // group), masked per row."""
    torch.manual_seed(2)
    rows, heads, kv_heads, dim, own = 3, 6, 2, 8, 7
    query = torch.randn(rows, heads, 1, dim)
    keys, values = torch.randn(rows, kv_heads, own, dim), torch.randn(rows, kv_heads, own, dim)
    filled = torch.tensor([7, 3, 5])
    visible = torch.arange(own)[None, :] < filled[:, None]
    mask = torch.zeros(rows, 1, 1, own).masked_fill_(~visible[:, None, None], torch.finfo(torch.float32).min)
    got, _ = shared_attention.attention(
        SimpleNamespace(layer_idx=0), query, keys, values, mask, scaling=0.4, decode_step=True
    )
    assert got.shape == (rows, 1, heads, dim)
    for r in range(rows):
        k = keys[r, :, : filled[r]].repeat_interleave(heads // kv_heads, dim=0)
        v = values[r, :, : filled[r]].repeat_interleave(heads // kv_heads, dim=0)
        weights = torch.softmax(query[r] @ k.transpose(-1, -2) * 0.4, dim=-1)
        assert torch.allclose(got[r, 0], (weights @ v)[:, 0], atol=1e-6)


def test_decode_steps_without_a_shared_prefix_use_grouped_queries_and_generate_the_same_tokens(
    tiny_model_dir: Path, monkeypatch
):
    requests = [gen(q, until=[], max_gen_toks=10) for q in QUESTIONS]
    expected = HFModel(str(tiny_model_dir), batch_size=2, batching="lmeval").generate_until(requests)
    grouped: list[int] = []
    real = shared_attention.attention

    def spy(module, query, key, value, mask, shared_prefix=None, **kwargs):
        if kwargs.get("decode_step") and shared_prefix is None:
            grouped.append(query.shape[0])
        return real(module, query, key, value, mask, shared_prefix=shared_prefix, **kwargs)

    model = HFModel(str(tiny_model_dir), batch_size=2, prefix_sharing=False)
    monkeypatch.setattr(shared_attention, "attention", spy)
    assert model.generate_until(requests) == expected
    assert grouped and max(grouped) == 2, "the decode steps did not run the grouped attention"
    assert model.model.config._attn_implementation == "sdpa"  # restored after the run


def test_split_attention_refuses_attention_variants_it_does_not_reproduce():
    states = kv.PrefixStates((torch.zeros(1, 1, 2, 4),), (torch.zeros(1, 1, 2, 4),), (2,))
    q, k = torch.zeros(1, 2, 1, 4), torch.zeros(1, 1, 3, 4)
    with pytest.raises(RuntimeError, match="softcap"):
        shared_attention.attention(SimpleNamespace(layer_idx=0), q, k, k, None, shared_prefix=states, softcap=30.0)


def test_rows_behind_one_few_shot_prefix_read_it_once_and_generate_the_same_tokens(tiny_model_dir: Path, monkeypatch):
    requests = [gen(FEW_SHOT + q, until=[], max_gen_toks=12) for q in QUESTIONS]
    expected = HFModel(str(tiny_model_dir), batch_size=2, prefix_sharing=False).generate_until(requests)
    split_calls: list[tuple[int, int, int]] = []
    real = shared_attention.attention

    def spy(module, query, key, value, mask, shared_prefix=None, **kwargs):
        if shared_prefix is not None:
            split_calls.append((query.shape[0], shared_prefix.lengths[0], key.shape[2]))
        return real(module, query, key, value, mask, shared_prefix=shared_prefix, **kwargs)

    model = HFModel(str(tiny_model_dir), batch_size=2)
    monkeypatch.setattr(shared_attention, "attention", spy)
    assert model.generate_until(requests) == expected
    prefix_tokens = len(model.tokenizer(FEW_SHOT)["input_ids"])
    assert split_calls, "the decode steps did not use the shared prefix"
    assert max(rows for rows, _, _ in split_calls) == 2
    assert all(shared >= prefix_tokens - 2 for _, shared, _ in split_calls)
    longest_own = max(len(model.tokenizer(FEW_SHOT + q)["input_ids"]) for q in QUESTIONS) - min(
        s for _, s, _ in split_calls
    )
    assert all(width <= longest_own + 12 for _, _, width in split_calls)  # slots hold only what follows the prefix
    assert model.model.config._attn_implementation == "sdpa"  # restored after the run


def test_jobs_without_a_common_memoized_prefix_keep_the_whole_context_in_their_slots():
    states = kv.PrefixStates((torch.zeros(1, 1, 6, 2),), (torch.zeros(1, 1, 6, 2),), (6,))
    a = decode.Job((1, 2, 3, 4, 5, 6, 7, 8), states)
    b = decode.Job((1, 2, 3, 9, 9, 9, 9, 9), states)
    assert decode._shared_prefix([a, decode.Job((1, 2, 3), None)]) is None
    assert decode._shared_prefix([a, b]).lengths == (3,)  # cut to the tokens both start with
    assert decode._shared_prefix([a, decode.Job((1, 2, 3, 4), states)]).lengths == (
        3,
    )  # its last token is fed, not shared
    assert decode._shared_prefix([a, decode.Job((5, 2), states)]) is None


def test_the_models_attention_is_restored_when_generation_fails(tiny_model_dir: Path):
    model = HFModel(str(tiny_model_dir))
    with pytest.raises(ValueError), shared_attention.active(model.model):
        assert model.model.config._attn_implementation == shared_attention.NAME
        raise ValueError("boom")
    assert model.model.config._attn_implementation == "sdpa"


def test_the_cpu_kernel_and_the_plain_tensor_operations_agree():
    """Off a CPU the split runs in plain tensor operations: the same values and log-sum-exps."""
    torch.manual_seed(1)
    query, key, value = torch.randn(2, 3, 6, 8), torch.randn(2, 3, 9, 8), torch.randn(2, 3, 9, 8)
    mask = torch.zeros(1, 1, 6, 9).masked_fill_(torch.rand(1, 1, 6, 9) < 0.3, torch.finfo(torch.float32).min)
    for m in (None, mask):
        fast, fast_lse = shared_attention._softmax_part(query, key, value, m, 0.4)
        plain, plain_lse = shared_attention.plain_softmax_part(query, key, value, m, 0.4)
        assert torch.allclose(fast, plain, atol=1e-5) and torch.allclose(fast_lse, plain_lse, atol=1e-5)
