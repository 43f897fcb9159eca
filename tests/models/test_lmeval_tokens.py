"""The pure token rules of HFModel (lm-eval 0.4.13's HFLM), tested without a model."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalflow.errors import ModelError
from evalflow.models.lmeval_tokens import (
    DEFAULT_MAX_LENGTH,
    TOKENIZER_INFINITY,
    check_pair,
    encode_pair,
    hf_generate_kwargs,
    model_input,
    normalize_gen_kwargs,
    resolve_max_length,
    rolling_windows,
    split_trailing_space,
    stop_sequences,
    strip_at_stops,
)


def char_encode(s: str) -> list[int]:
    """A toy tokenizer: one token per character (its code point)."""
    return [ord(c) for c in s]


def test_trailing_space_moves_into_the_continuation():
    assert split_trailing_space("Answer: \n ", "4") == ("Answer:", " \n 4")
    assert split_trailing_space("Answer:", " 4") == ("Answer:", " 4")


def test_encode_pair_splits_the_whole_encoding_at_the_context_length():
    # a tokenizer with BOS 999 that merges "a b" into token 1: lm-eval encodes the whole string and
    # cuts it after as many tokens as the context alone has, even where a merge spans the cut
    def merging(s: str) -> list[int]:
        return [999] + char_encode(s.replace("a b", "\x01"))

    ctx, cont = encode_pair(merging, char_encode, 0, "x a ", "b c")
    assert ctx == [999, ord("x"), ord(" "), ord("a")]
    assert cont == [ord(" "), ord("c")]


def test_empty_context_uses_the_prefix_token_unless_the_continuation_starts_with_it():
    assert encode_pair(char_encode, char_encode, 7, "", "ab") == ([7], [97, 98])
    assert encode_pair(char_encode, char_encode, 97, "", "ab") == ([97], [98])
    with pytest.raises(ModelError, match="empty continuation"):
        encode_pair(char_encode, char_encode, 7, "", "")


def test_model_input_left_truncates_to_max_length():
    assert model_input([1, 2], [3], max_length=10) == ([1, 2], 1)
    assert model_input(list(range(10)), [10, 11], max_length=4) == ([7, 8, 9, 10], 2)


def test_check_pair_refuses_what_lm_eval_asserts_against():
    check_pair([1], [2], 4, ("c", "x"))
    with pytest.raises(ModelError, match="no tokens"):
        check_pair([1], [], 4, ("c", ""))
    with pytest.raises(ModelError, match="longer than the model's max_length"):
        check_pair([1], [2] * 5, 4, ("c", "x"))


@given(st.lists(st.integers(1, 50), max_size=60), st.integers(1, 12))
def test_rolling_windows_score_every_token_once_with_contiguous_context(tokens, max_length):
    windows = rolling_windows(tokens, prefix_token=0, max_length=max_length)
    assert [t for _, cont in windows for t in cont] == tokens
    start = 0
    for i, (ctx, cont) in enumerate(windows):
        assert ctx and 1 <= len(cont) <= max_length
        assert len(ctx) + len(cont) <= max_length + 1  # fits the model window after [:-1]
        seen = ([0] + tokens)[: start + 1] if i == 0 else tokens[:start]
        assert ctx == seen[-len(ctx) :]  # the context is exactly the tokens right before cont
        # each window after the first sees a full max_length context+cont[:-1]
        if i > 0:
            assert len(ctx) + len(cont) - 1 == max_length
        start += len(cont)


def test_rolling_windows_of_nothing_is_nothing():
    assert rolling_windows([], prefix_token=0, max_length=4) == []


def test_resolve_max_length_order():
    tok = SimpleNamespace(model_max_length=512)
    assert resolve_max_length(SimpleNamespace(n_positions=1024, max_position_embeddings=9), tok) == 1024
    assert resolve_max_length(SimpleNamespace(max_position_embeddings=4096), tok) == 4096
    nested = SimpleNamespace(text_config=SimpleNamespace(max_position_embeddings=32768), n_positions=1200)
    assert resolve_max_length(nested, tok) == 32768
    assert resolve_max_length(SimpleNamespace(), tok) == 512
    inf = SimpleNamespace(model_max_length=TOKENIZER_INFINITY)
    assert resolve_max_length(SimpleNamespace(), inf) == DEFAULT_MAX_LENGTH


def test_normalize_gen_kwargs_aliases_and_greedy_rules():
    kw = normalize_gen_kwargs({"until": ("\n\n", "Q:"), "max_new_tokens": 5, "max_tokens": 9}, 256)
    assert kw == {"until": ["\n\n", "Q:"], "max_gen_toks": 5, "do_sample": False}
    assert normalize_gen_kwargs({"until": "\n"}, 256)["until"] == ["\n"]
    assert normalize_gen_kwargs({}, 77)["max_gen_toks"] == 77
    assert normalize_gen_kwargs({"temperature": 0.7}, 1)["do_sample"] is True
    forced = normalize_gen_kwargs({"do_sample": False, "temperature": 0.7}, 1)
    assert forced["temperature"] == 0.0 and forced["do_sample"] is False
    kept = normalize_gen_kwargs({"do_sample": True, "temperature": 0.5, "top_p": 0.9}, 1)
    assert kept["temperature"] == 0.5 and kept["top_p"] == 0.9


def test_stop_sequences_append_eos_once():
    assert stop_sequences(["\n"], "</s>") == ["\n", "</s>"]
    assert stop_sequences("Q:", "</s>") == ["Q:", "</s>"]
    assert stop_sequences(None, "</s>") == ["</s>"]
    assert stop_sequences(["</s>"], "</s>") == ["</s>"]
    assert stop_sequences(["x"], None) == ["x"]
    with pytest.raises(ModelError, match="until"):
        stop_sequences(5, "</s>")


def test_strip_at_the_first_stop_of_any_kind():
    assert strip_at_stops("a. b\nc. d", ["\n", "."]) == "a"
    assert strip_at_stops("a\nb", ["", "\n"]) == "a"  # empty stops are ignored
    assert strip_at_stops("abc", []) == "abc"


def test_hf_generate_kwargs_greedy_drops_temperature():
    assert hf_generate_kwargs({"do_sample": False, "temperature": 0.0}) == {"do_sample": False}
    assert hf_generate_kwargs({}) == {"do_sample": False}
    assert hf_generate_kwargs({"do_sample": True, "temperature": 0.8}) == {"do_sample": True, "temperature": 0.8}
