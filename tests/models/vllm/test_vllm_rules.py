"""model=vllm's request rules (evalflow.models.vllm.request_rules) against lm-eval 0.4.13's own functions,
on many inputs; lm-eval's ``VLLM`` methods that need vLLM to import are mirrored by hand and checked
against the real engine in tests/models/vllm/test_vllm_engine.py."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalflow.errors import ConfigError, ModelError
from evalflow.models.vllm import request_rules as rules

lm_utils = pytest.importorskip("lm_eval.models.utils")

tokens = st.lists(st.integers(0, 50), max_size=40)


@settings(max_examples=200, deadline=None)
@given(tokens, st.integers(1, 40), st.integers(2, 80), st.sampled_from(rules.TRUNCATION_SIDES))
def test_truncate_context_is_lm_evals_maybe_truncate(toks: list[int], max_gen: int, max_len: int, side: str) -> None:
    if max_len - max_gen <= 0 and len(toks) + max_gen > max_len:
        with pytest.raises(ModelError, match="max_gen_toks"):
            rules.truncate_context(toks, max_gen, max_len, side)
        return
    assert rules.truncate_context(toks, max_gen, max_len, side) == lm_utils.maybe_truncate(
        list(toks), max_gen_toks=max_gen, max_model_len=max_len, side=side, verbose=False
    )


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["until", "max_gen_toks", "max_tokens", "temperature", "do_sample", "top_p"]),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(0, 5),
            st.floats(0, 2),
            st.text(max_size=3),
            st.lists(st.text(max_size=3), max_size=3),
        ),
    ),
    st.one_of(st.none(), st.just("</s>")),
)
def test_sampling_kwargs_are_lm_evals_modify_gen_kwargs(gen_kwargs: dict, eos: str | None) -> None:
    """VLLM.modify_gen_kwargs, transcribed from lm-eval's source onto its own utils."""

    def lm_eval_modify(g: dict) -> tuple:
        g = lm_utils.normalize_gen_kwargs(dict(g), default_max_gen_toks=256)
        until = lm_utils.handle_stop_sequences(g.pop("until", None), eos=eos)
        max_gen = int(g.pop("max_gen_toks", 256))
        g.pop("do_sample", None)
        return {"skip_special_tokens": False, "spaces_between_special_tokens": False} | g, until, max_gen

    try:
        expected = lm_eval_modify(gen_kwargs)
    except (ValueError, TypeError):
        with pytest.raises((ModelError, ValueError, TypeError)):
            rules.sampling_kwargs(gen_kwargs, eos, 256)
        return
    assert rules.sampling_kwargs(gen_kwargs, eos, 256) == expected


def test_scored_input_keeps_the_last_max_length_minus_one_tokens() -> None:
    # lm-eval: inp = (ctx + cont)[-(L-1):]; ctxlen = len(ctx) - max(0, len(ctx) + len(cont) - (L-1))
    assert rules.scored_input([1, 2, 3, 4], [5, 6], max_length=5) == ([3, 4, 5, 6], 2)
    assert rules.scored_input([1], [2], max_length=2048) == ([1, 2], 1)


def test_continuation_logprob_sums_the_continuations_positions_and_checks_argmax() -> None:
    prompt = [7, 8, 9]
    logprobs = [None, {8: -0.5, 3: -1.0}, {9: -2.0, 4: -0.1}]
    assert rules.continuation_logprob(prompt, logprobs, ctxlen=1) == (-2.5, False)
    assert rules.continuation_logprob(prompt, logprobs, ctxlen=2) == (-2.0, False)
    assert rules.continuation_logprob(prompt, [None, {8: -0.5}, {9: -0.2, 4: -0.3}], ctxlen=1) == (
        pytest.approx(-0.7),
        True,
    )
    with pytest.raises(ModelError, match="no log-probability for prompt token 9"):
        rules.continuation_logprob(prompt, [None, {8: -0.5}, {4: -0.3}], ctxlen=1)


def test_one_token_continuations_are_grouped_by_their_context() -> None:
    inputs = [
        ([1, 2, 65], 2),
        ([1, 2, 66], 2),
        ([1, 2, 65], 2),  # two choices, one asked twice
        ([1, 3, 65], 2),  # another context
        ([1, 2, 65, 66], 2),  # two continuation tokens: scored whole
        ([9], 0),
    ]  # no context left after truncation
    contexts, candidates, owner = rules.next_token_groups(inputs)
    assert contexts == [[1, 2], [1, 3]] and candidates == [[65, 66], [65]]
    assert owner == {0: [0], 1: [0], 2: [0], 3: [1]}
    # a LoRA run asks every continuation token after its own prefix; the prefix [1, 2] is shared
    prefixes, asked, positions = rules.next_token_groups(inputs, every_position=True)
    assert prefixes == [[1, 2], [1, 3], [1, 2, 65]] and asked == [[65, 66], [65], [66]]
    assert positions == {0: [0], 1: [0], 2: [0], 3: [1], 4: [0, 2]}


def test_a_prefix_asked_for_more_tokens_than_vllm_takes_in_one_request_is_split() -> None:
    inputs = [([1, 2, t], 2) for t in (65, 66, 67, 65)]
    prefixes, asked, owner = rules.next_token_groups(inputs, max_named=2)
    assert prefixes == [[1, 2], [1, 2]] and asked == [[65, 66], [67]]
    assert owner == {0: [0], 1: [0], 2: [1], 3: [0]}


def test_next_token_answers_sum_the_positions_and_need_each_to_be_the_arg_max() -> None:
    found = [[{7: -0.5, 3: -0.1}], [{8: -0.25}]]  # position 1: 3 is the arg-max, not 7
    assert rules.next_token_answer([7, 8], found) == (-0.75, False)
    assert rules.next_token_answer([8], found[1:]) == (-0.25, True)


def test_encode_kwargs_never_double_the_bos() -> None:
    assert rules.encode_kwargs("<s>hi", "<s>", None, None) == {"add_special_tokens": False}
    assert rules.encode_kwargs("hi", "<s>", None, True) == {"add_special_tokens": True}
    assert rules.encode_kwargs("hi", "<s>", False, True) == {"add_special_tokens": False}
    assert rules.encode_kwargs("hi", None, None, None) == {}
    for args in [(True, None), (None, False), (None, None), (False, True)]:
        assert rules.special_tokens_kwargs(*args) == lm_utils._add_special_kwargs(*args)


def test_eos_text_falls_back_to_the_tokenizers_eos_token() -> None:
    assert rules.eos_text(lambda i: "<|endoftext|>", 0, "x") == "<|endoftext|>"
    assert rules.eos_text(lambda i: "", 2, "</s>") == "</s>"
    assert rules.eos_text(lambda i: "?", None, None) is None


def test_sampled_means_a_positive_temperature() -> None:
    assert not rules.is_sampled({"temperature": 0.0})
    assert rules.is_sampled({"temperature": 0.7})


def test_a_bad_truncation_side_is_refused() -> None:
    with pytest.raises(ConfigError, match="left, right, middle"):
        rules.parse_truncation_side("both")
