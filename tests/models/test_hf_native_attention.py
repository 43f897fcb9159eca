"""The compiled decode-step attention (``model.native_attention``): the same softmax as the plain
computation, built once per machine, torch's kernel wherever it cannot run."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from evalflow.errors import ConfigError
from evalflow.models.hf import HFModel
from evalflow.models.hf.fast import decode, native_attention, shared_attention
from tests.support.generation import gen

needs_kernel = pytest.mark.skipif(
    not native_attention.cpu_supports() or native_attention._compiler() is None,
    reason="the kernel needs x86-64 with AVX2/FMA and a C compiler",
)


def _reference(query, key, value, visible, scale):
    """float64 softmax attention, query i of row r over columns [0, visible[r, i])."""
    rows, heads, n, _ = query.shape
    out = torch.zeros(query.shape, dtype=torch.float64)
    lse = torch.zeros((rows, heads, n, 1), dtype=torch.float64)
    for r in range(rows):
        for i in range(n):
            cols = int(visible[r, i])
            scores = query[r, :, i].double()[:, None, :] @ key[r, :, :cols].double().transpose(-1, -2) * scale
            lse[r, :, i] = torch.logsumexp(scores[:, 0], dim=-1, keepdim=True)
            out[r, :, i] = (torch.softmax(scores, dim=-1) @ value[r, :, :cols].double())[:, 0]
    return out, lse


@needs_kernel
@pytest.mark.parametrize("avx512", [True, False])
@pytest.mark.parametrize(("head_dim", "n"), [(8, 15), (64, 15), (128, 15), (64, 3), (64, 41), (16, 64), (64, 150)])
def test_the_kernel_equals_float64_attention_over_each_querys_own_columns(head_dim: int, n: int, avx512: bool):
    """Query counts that fill the score tiles (two vectors of 8 or 16), leave one vector or a partial
    one, and every value-tile height; head sizes of one, two and several value vectors; the AVX-512
    build (where the CPU has it and the head size is a multiple of 16) and the AVX2 one."""
    torch.manual_seed(head_dim + n)
    rows, heads, capacity = 3, 2, 300
    keys, values = torch.randn(rows, heads, capacity, head_dim) * 2, torch.randn(rows, heads, capacity, head_dim)
    key, value = keys[:, :, :290], values[:, :, :290]  # views into a bigger buffer, as the decode slots are
    query = torch.randn(rows, heads, n, head_dim)
    visible = torch.tensor(
        [[290 - i % 5 for i in range(n)], [1 + i % 5 for i in range(n)], [130 + i for i in range(n)]]
    )
    attend = native_attention.kernel(head_dim, avx512=avx512)
    assert attend is not None
    got, got_lse = attend(query, key, value, visible, 0.37)
    want, want_lse = _reference(query, key, value, visible, 0.37)
    # as close to float64 as torch's own fp32 kernel is (its scores sum 64+ products in one chain too)
    sees = torch.arange(key.shape[2])[None, None, None, :] < visible[:, None, :, None]
    torchs = F.scaled_dot_product_attention(query, key, value, attn_mask=sees, scale=0.37).double()
    assert float((got.double() - want).abs().max()) <= 2 * float((torchs - want).abs().max()) + 1e-6
    assert torch.allclose(got_lse.double(), want_lse, atol=2e-5)


@needs_kernel
def test_the_avx512_build_gives_the_avx2_builds_floats_where_the_cpu_has_it():
    """Each score sums its products, and each output its columns, in the same order in both builds,
    so switching a machine's build changes no generated token: a decode step and a prefill compared."""
    wide, narrow = native_attention.kernel(64), native_attention.kernel(64, avx512=False)
    assert narrow.vector_width == 8 and native_attention.kernel(8).vector_width == 8  # 8 floats a head: AVX2 only
    if not native_attention.has_avx512():
        assert wide.vector_width == 8
        pytest.skip("this CPU has no AVX-512: one build")
    assert wide.vector_width == 16
    torch.manual_seed(3)
    key, value = torch.randn(2, 4, 3, 700, 64).unbind(0)
    step = (torch.randn(4, 3, 15, 64), key, value, torch.randint(1, 700, (4, 15)), 0.125)
    for a, b in zip(wide(*step), narrow(*step)):
        assert torch.equal(a, b)
    causal = SimpleNamespace(is_causal=True)
    prompt = (torch.randn(1, 9, 700, 64), key[:1], value[:1], None, None)
    assert torch.equal(
        shared_attention._causal_prefill(wide, causal, *prompt),
        shared_attention._causal_prefill(narrow, causal, *prompt),
    )


@needs_kernel
def test_the_kernel_declines_what_it_does_not_take_so_the_caller_uses_torchs():
    attend = native_attention.kernel(8)
    q, k = torch.zeros(1, 1, 2, 8), torch.zeros(1, 1, 4, 8)
    assert attend(q.double(), k.double(), k.double(), torch.ones(1, 2, dtype=torch.long), 1.0) is None


@needs_kernel
def test_a_prompts_prefill_through_the_kernel_equals_sdpas_causal_attention():
    """A prefill's thousands of queries run in chunks of MAX_QUERIES; each token sees up to its own
    column, after whatever the cache held before (``columns - tokens``)."""
    torch.manual_seed(1)
    heads, kv_heads, dim = 6, 2, 16
    causal, bidirectional = SimpleNamespace(is_causal=True), SimpleNamespace(is_causal=False)
    for tokens, before in ((150, 0), (70, 33)):
        query = torch.randn(1, heads, tokens, dim)
        key, value = torch.randn(2, 1, kv_heads, before + tokens, dim)
        got = shared_attention._causal_prefill(native_attention.kernel(dim), causal, query, key, value, None, None)
        sees = torch.arange(before + tokens)[None, :] <= torch.arange(before, before + tokens)[:, None]
        want = F.scaled_dot_product_attention(
            query.double(), key.double(), value.double(), attn_mask=sees, enable_gqa=True
        )
        assert got is not None and torch.allclose(got.double(), want.transpose(1, 2), atol=2e-6)
    assert (
        shared_attention._causal_prefill(
            native_attention.kernel(dim), causal, query, key, value, torch.zeros(1, 1, 70, 103), None
        )
        is None
    )
    assert (
        shared_attention._causal_prefill(
            native_attention.kernel(dim),
            causal,
            query.expand(2, -1, -1, -1),
            key.expand(2, -1, -1, -1),
            value.expand(2, -1, -1, -1),
            None,
            None,
        )
        is None
    )  # padded batches: sdpa
    assert (
        shared_attention._causal_prefill(native_attention.kernel(dim), bidirectional, query, key, value, None, None)
        is None
    )


@needs_kernel
def test_a_build_is_reused_and_a_failed_one_falls_back_to_torch(tmp_path: Path, monkeypatch, caplog):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = native_attention._build(16)
    stamp = first.stat().st_mtime_ns
    assert native_attention._build(16) == first and first.stat().st_mtime_ns == stamp  # not compiled again
    assert list(first.parent.iterdir()) == [first]  # no partial file left behind
    monkeypatch.setattr(native_attention, "_compiler", lambda: "/bin/false")  # a "compiler" that fails
    native_attention.kernel.cache_clear()
    try:
        with caplog.at_level(logging.INFO, logger=native_attention.__name__):
            assert native_attention.kernel(24) is None
    finally:
        native_attention.kernel.cache_clear()
    assert "building it failed" in caplog.text
    assert not [p for p in first.parent.iterdir() if p.name.startswith("decode_attention_24")]


def test_head_sizes_the_kernel_is_not_built_for_are_refused_before_compiling():
    assert "multiple of 8" in native_attention._unsupported(12)
    assert "multiple of 8" in native_attention._unsupported(512)


@needs_kernel
def test_greedy_decoding_with_the_kernel_generates_what_torchs_kernel_does(tiny_model_dir: Path, monkeypatch):
    """Same tokens (draft tokens on, rows of different lengths), and the kernel really ran."""
    requests = [
        gen(q, until=[], max_gen_toks=12) for q in ["The cat sat", "Paris is the capital of a", "3 + 3 =", "Once"]
    ]
    expected = HFModel(str(tiny_model_dir), batch_size=3, native_attention=False).generate_until(requests)
    calls: list[tuple[int, ...]] = []
    real = native_attention.kernel(8)

    def counting(query, key, value, visible, scale):
        calls.append(tuple(visible.shape))
        return real(query, key, value, visible, scale)

    prefills: list[bool] = []
    real_prefill = shared_attention._causal_prefill

    def spied_prefill(*args):
        done = real_prefill(*args)
        prefills.append(done is not None)
        return done

    monkeypatch.setattr(decode, "_native_kernel", lambda model: counting)
    monkeypatch.setattr(shared_attention, "_causal_prefill", spied_prefill)
    assert HFModel(str(tiny_model_dir), batch_size=3).generate_until(requests) == expected
    assert calls and max(rows for rows, _ in calls) == 3
    assert max(n for _, n in calls) > 2  # a row's draft tokens (group 2 x tokens) went through it
    assert prefills and all(prefills)  # every prompt's prefill too


def test_without_the_setting_decode_steps_never_call_the_kernel(tiny_model_dir: Path, monkeypatch):
    monkeypatch.setattr(decode, "_native_kernel", lambda model: pytest.fail("the kernel was asked for"))
    spied: list[bool] = []
    real = shared_attention.attention

    def spy(*args, **kwargs):
        spied.append(kwargs.get("native") is None and kwargs.get("visible") is None)
        return real(*args, **kwargs)

    monkeypatch.setattr(shared_attention, "attention", spy)
    HFModel(str(tiny_model_dir), batch_size=2, native_attention=False).generate_until(
        [gen("The cat", until=[], max_gen_toks=4)]
    )
    assert spied and all(spied)


def test_the_setting_must_be_a_boolean(tiny_model_dir: Path):
    with pytest.raises(ConfigError, match="model.native_attention"):
        HFModel(str(tiny_model_dir), native_attention="yes")
