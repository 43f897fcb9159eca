"""lm-eval's gguf client as evalflow's ``gguf_server`` model: its request bodies and its reading
of an echo by text offsets (the real server and lm-eval itself: tests/lmeval_compat/test_gguf_peer.py)."""

from __future__ import annotations

import pytest

from evalflow.core.records import Request
from evalflow.errors import ModelError
from evalflow.models.api.gguf_server import generation_body, loglikelihood_body, offset_score

ECHO = {
    "tokens": ["Q", ":", " yes", " no"],
    "text_offset": [0, 1, 2, 6],
    "token_logprobs": [None, -1.0, -0.5, -2.0],
    "top_logprobs": [None, {":": -1.0}, {" yes": -0.5, " no": -0.9}, {" no": -2.0, " x": -2.5}],
}


def test_the_continuation_starts_at_the_first_token_at_or_after_the_context():
    assert offset_score(ECHO, 2) == (-0.5, True)  # " yes", then the generated " no" left out
    assert offset_score(ECHO, 1) == (-1.5, True)
    lower = {**ECHO, "top_logprobs": [None, {":": -1.0}, {" no": -0.1, " yes": -0.5}, {" no": -2.0}]}
    assert offset_score(lower, 2) == (-0.5, False)


def test_bodies_are_lm_evals():
    assert loglikelihood_body("Q:", " yes") == {
        "prompt": "Q: yes",
        "logprobs": 10,
        "temperature": 0.0,
        "max_tokens": 1,
        "echo": True,
    }
    # only `until` is read; no max_tokens (the server's default length applies, as in lm-eval)
    assert generation_body("Q:", {"until": ["\n"], "max_gen_toks": 5}) == {
        "prompt": "Q:",
        "logprobs": 10,
        "temperature": 0.0,
        "stop": ["\n"],
    }
    assert generation_body("Q:", {})["stop"] == ["</s>"]


def test_rolling_log_likelihoods_are_refused_as_lm_eval_refuses_them():
    from evalflow.models.api.gguf_server import GgufServer

    model = object.__new__(GgufServer)
    with pytest.raises(ModelError, match="loglikelihood_rolling not yet supported for GGUF models"):
        model._loglikelihood_rolling([Request("loglikelihood_rolling", ("text",))], lambda i, a: None)
