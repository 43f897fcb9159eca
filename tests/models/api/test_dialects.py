"""The chat model's dialects (``evalflow.models.api.dialects``): the bodies, paths and headers each
sends to a loopback recording server, checked against lm-eval 0.4.13's own ``_create_payload`` (run
in the peer venv when it is there) and against the contract's fixed parts (paths, key headers)."""

from __future__ import annotations

import json
import subprocess

import pytest

from evalflow.core.records import Request
from evalflow.errors import ConfigError
from evalflow.models.registry import build_model, model_identity
from tests.support.chat_recorder import ChatRecorder
from tests.support.parity_harness import PEER_VENV
from tests.support.parity_harness import missing as peer_missing

CHAT = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Q: 2+2?"},
    {"role": "assistant", "content": "4"},
    {"role": "user", "content": "Q: 3+3?"},
]
GEN_KWARGS = {"until": ["\n\n", "Q:", " "], "do_sample": False, "max_gen_toks": 32, "top_p": 0.5}
# lm-eval's class for each dialect, and the attributes its _create_payload reads
PEER_CLASS = {
    "openai": "lm_eval.models.openai_completions:LocalChatCompletion",
    "openai_hosted": "lm_eval.models.openai_completions:OpenAIChatCompletion",
    "azure": "lm_eval.models.openai_completions:AzureOpenaiChatCompletionsLM",
    "anthropic": "lm_eval.models.anthropic_llms:AnthropicChat",
}


def ask(rec: ChatRecorder, monkeypatch, dialect: str, model: str = "m", **extra) -> str:
    """The text of the model's answer to CHAT (its Generation's, which lm-eval's string equals)."""
    monkeypatch.setenv("SOME_KEY", "sk-secret")
    m = build_model(
        {
            "type": "openai_chat",
            "model": model,
            "base_url": rec.url,
            "dialect": dialect,
            "api_key_env": "SOME_KEY",
            **extra,
        }
    )
    (answer,) = m.generate_until([Request("generate_until", (json.dumps(CHAT), GEN_KWARGS))])
    return answer.text


def peer_payload(dialect: str, model: str) -> dict:
    """lm-eval's own body for CHAT and GEN_KWARGS, as its one-at-a-time path builds it (eos None)."""
    module, cls = PEER_CLASS[dialect].split(":")
    code = (
        f"import json; from {module} import {cls} as C; o = object.__new__(C); o.model = {model!r}; "
        f"o._max_gen_toks = 256; print(json.dumps(o._create_payload(json.loads({json.dumps(CHAT)!r}), "
        f"generate=True, gen_kwargs=json.loads({json.dumps(GEN_KWARGS)!r}), seed=1234, eos=None)))"
    )
    out = subprocess.run([str(PEER_VENV / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize(
    "dialect, model, path, key_headers",
    [
        ("openai", "m", "/v1/chat/completions", {"Authorization": "Bearer sk-secret"}),
        ("openai_hosted", "gpt-4o-mini", "/v1/chat/completions", {"Authorization": "Bearer sk-secret"}),
        ("openai_hosted", "o3-mini", "/v1/chat/completions", {"Authorization": "Bearer sk-secret"}),
        (
            "azure",
            "dep1",
            "/v1/openai/deployments/dep1/chat/completions?api-version=2025-03-01-preview",
            {"Authorization": "Bearer sk-secret"},
        ),
        ("anthropic", "claude-x", "/v1/messages", {"x-api-key": "sk-secret", "anthropic-version": "2023-06-01"}),
    ],
)
def test_each_dialect_sends_lm_evals_body_to_its_path_with_its_key_headers(
    monkeypatch, dialect, model, path, key_headers
):
    with ChatRecorder(model) as rec:
        answer = ask(rec, monkeypatch, dialect, model)
    (body,), ((got_path, headers),) = rec.bodies, rec.requests
    assert answer.startswith("answer ")  # read from choices[0].message, or Anthropic's content[0].text
    assert got_path == path
    assert {k: headers.get(k) for k in key_headers} == key_headers
    if dialect == "anthropic":
        assert "Authorization" not in headers
        assert body["system"] == "Answer briefly." and "seed" not in body
        assert body["stop_sequences"] == ["Q:"]  # whitespace-only stops dropped, as Anthropic requires
    if dialect == "openai_hosted" and model == "o3-mini":
        assert "stop" not in body and body["temperature"] == 1
    if peer_missing() is None:
        assert body == peer_payload(dialect, model)


def test_lm_evals_header_replaces_the_key_and_never_sits_in_the_config(monkeypatch):
    monkeypatch.setenv("HDRS", json.dumps({"Authorization": "Bearer from-header", "X-Org": "o"}))
    with ChatRecorder("m") as rec:
        ask(rec, monkeypatch, "openai", headers_env="HDRS")
    headers = rec.requests[0][1]
    assert headers["Authorization"] == "Bearer from-header" and headers["X-Org"] == "o"
    base = {"type": "openai_chat", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    assert model_identity({**base, "headers_env": "HDRS"}) == model_identity(base)


def test_eos_string_and_think_end_token_change_the_answers_and_the_identity(monkeypatch):
    with ChatRecorder("m") as rec:
        ask(rec, monkeypatch, "openai", eos_string="</s>")
    assert rec.bodies[0]["stop"] == ["\n\n", "Q:", " ", "</s>"]
    base = {"type": "openai_chat", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    for key, value in (("eos_string", "</s>"), ("think_end_token", "</think>"), ("dialect", "anthropic")):
        assert model_identity({**base, key: value}) != model_identity(base)
    for key, value in (("verify_certificate", False), ("ca_cert_path", "/etc/ca.pem"), ("auth_token_env", "T")):
        assert model_identity({**base, key: value}) == model_identity(base)


def test_think_end_token_keeps_the_answer_after_the_reasoning():
    from evalflow.models.api.dialects import openai_chat_answer

    answer = {"choices": [{"index": 0, "message": {"content": "hmm... </think>\n 42"}}]}
    assert openai_chat_answer(answer, "u", "</think>").text == "42"
    assert openai_chat_answer(answer, "u", "</think>").finish.reasoning == "hmm... "  # what lm-eval drops
    assert openai_chat_answer(answer, "u", None).text == "hmm... </think>\n 42"


def test_a_dialect_the_model_kind_does_not_speak_is_refused_by_name():
    with pytest.raises(ConfigError, match="model.dialect='anthropic' is not a contract of the openai_completions"):
        model_identity(
            {"type": "openai_completions", "model": "m", "base_url": "http://h:1/v1", "dialect": "anthropic"}
        )
