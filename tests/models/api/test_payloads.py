"""Request bodies and response parsing are lm-eval 0.4.13's (``openai_completions.py``), pinned."""

from __future__ import annotations

import pytest

from evalflow.errors import ModelError
from evalflow.models.api import payloads


def test_loglikelihood_body_is_lm_evals():
    assert payloads.loglikelihood_payload("m", "text", seed=7) == {
        "model": "m",
        "prompt": "text",
        "temperature": 0,
        "max_tokens": 1,
        "logprobs": 1,
        "seed": 7,
        "echo": True,
    }


def test_completion_body_pops_lm_eval_keys_and_passes_the_rest():
    gen = {"until": ("Question:", "\n\n"), "do_sample": False, "temperature": 0.0, "top_p": 0.9}
    body = payloads.completion_payload("m", "ctx", gen, max_gen_toks=256, seed=1234, eos="<|im_end|>")
    assert body == {
        "prompt": "ctx",
        "model": "m",
        "max_tokens": 256,
        "temperature": 0.0,
        "stop": ["Question:", "\n\n", "<|im_end|>"],
        "seed": 1234,
        "top_p": 0.9,
    }
    assert gen["until"] == ("Question:", "\n\n")  # the request's kwargs are not mutated


def test_max_tokens_wins_over_max_gen_toks_then_the_default():
    body = payloads.completion_payload("m", "c", {"max_gen_toks": 5}, max_gen_toks=256, seed=1, eos=None)
    assert body["max_tokens"] == 5 and "max_gen_toks" not in body
    body = payloads.completion_payload(
        "m", "c", {"max_tokens": 3, "max_gen_toks": 5}, max_gen_toks=256, seed=1, eos=None
    )
    assert body["max_tokens"] == 3 and body["max_gen_toks"] == 5  # lm-eval passes the other one through


def test_eos_is_a_stop_sequence_once():
    assert payloads.stop_sequences("\n", "</s>") == ["\n", "</s>"]
    assert payloads.stop_sequences(["</s>"], "</s>") == ["</s>"]
    assert payloads.stop_sequences(None, None) == []
    with pytest.raises(ModelError, match="until"):
        payloads.stop_sequences(5, None)


def test_chat_body_has_messages_at_most_four_stops_and_no_eos():
    msgs = [{"role": "user", "content": "hi"}]
    body = payloads.chat_payload(
        "m", msgs, {"until": ["a", "b", "c", "d", "e"], "do_sample": False}, max_gen_toks=64, seed=1234
    )
    assert body == {
        "messages": msgs,
        "model": "m",
        "max_tokens": 64,
        "temperature": 0,
        "stop": ["a", "b", "c", "d"],
        "seed": 1234,
    }


def test_batched_prompts_as_lm_eval_sends_them():
    assert payloads.batch_prompts(["a"], tokenized=False) == "a"
    assert payloads.batch_prompts(["a", "b"], tokenized=False) == ["a", "b"]
    assert payloads.batch_prompts([(1, 2)], tokenized=True) == [[1, 2]]


def _choice(index, logprobs, tops):
    return {"index": index, "logprobs": {"token_logprobs": logprobs, "top_logprobs": tops}}


def test_score_is_the_sum_between_ctxlen_and_the_generated_token():
    choice = _choice(0, [None, -1.0, -0.5, -0.25, -9.0], [None, {"x": -1.0}, {"y": -0.5}, {"z": -0.25}, {"g": -9.0}])
    assert payloads.score_choice(choice, ctxlen=2) == (-0.75, True)
    assert payloads.score_choice(choice, ctxlen=1) == (-1.75, True)


def test_not_greedy_when_a_token_is_not_its_top_entry():
    choice = _choice(0, [None, -1.0, -2.0, -0.1], [None, {"a": -1.0}, {"b": -0.2, "c": -2.0}, {"g": -0.1}])
    assert payloads.score_choice(choice, ctxlen=1) == (-3.0, False)


def test_choices_are_put_in_prompt_order_and_counted():
    answer = {"choices": [{"index": 1, "text": "b"}, {"index": 0, "text": "a"}]}
    assert [c["text"] for c in payloads.choices(answer, 2, "u")] == ["a", "b"]
    with pytest.raises(ModelError, match="2 choice"):
        payloads.choices({"choices": [{"index": 0}]}, 2, "u")


def test_server_without_echo_logprobs_is_a_clear_error():
    with pytest.raises(ModelError, match="echo"):
        payloads.score_choice({"index": 0, "text": "x"}, ctxlen=1)


def test_null_content_becomes_empty_text():
    assert payloads.chat_text({"message": {"content": None}}) == ""
    assert payloads.completion_text({"text": None}) == ""
