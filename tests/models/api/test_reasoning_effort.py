"""The run's ``reasoning_effort`` (and Anthropic's ``thinking_budget``): in the request where a
backend takes it, in the answers' key exactly there, in results.json, and refused, before any model
call, where it could change nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalflow.config.settings import settings_from_config
from evalflow.errors import ConfigError
from evalflow.models.api.dialects import anthropic_body, hosted_chat_body, openai_chat_body
from evalflow.models.registry import model_identity
from evalflow.run.reasoning import template_args
from tests.support.chat_recorder import ChatRecorder
from tests.support.reasoning_server import ReasoningServer

MESSAGES = [{"role": "user", "content": "Q: 2+2?"}]
GEN = {"until": ["Q:"], "max_gen_toks": 32}
BASE = {"type": "openai_chat", "model": "m", "base_url": "http://127.0.0.1:9/v1"}


def test_openai_style_bodies_carry_the_effort_and_anthropics_the_thinking_budget() -> None:
    kw: dict[str, Any] = {"max_gen_toks": 256, "seed": 1234, "eos": None}
    plain = openai_chat_body("m", MESSAGES, GEN, **kw)
    assert openai_chat_body("m", MESSAGES, GEN, reasoning="low", **kw) == {**plain, "reasoning_effort": "low"}
    hosted = hosted_chat_body("gpt-5-mini", MESSAGES, GEN, reasoning="high", **kw)  # openai_hosted and azure
    assert hosted["reasoning_effort"] == "high" and "stop" not in hosted
    thinking = anthropic_body("claude", MESSAGES, {**GEN, "max_gen_toks": 4096}, reasoning=1024, **kw)
    assert thinking["thinking"] == {"type": "enabled", "budget_tokens": 1024} and thinking["temperature"] == 1
    with pytest.raises(ConfigError, match=r"thinking_budget=1024 is not below this request's max_tokens=32"):
        anthropic_body("claude", MESSAGES, GEN, reasoning=1024, **kw)


def test_the_effort_keys_a_served_chat_models_answers_only_when_set() -> None:
    low, high = (
        model_identity({**BASE, "reasoning_effort": "low"}),
        model_identity({**BASE, "reasoning_effort": "high"}),
    )
    assert len({json.dumps(model_identity(BASE)), json.dumps(low), json.dumps(high)}) == 3
    assert "reasoning_effort" not in model_identity(BASE)  # answers cached before it existed stay valid


@pytest.mark.parametrize(
    "config, takes",
    [
        ({**BASE, "type": "openai_completions", "tokenizer_backend": None, "reasoning_effort": "low"}, "no reasoning"),
        ({**BASE, "dialect": "anthropic", "reasoning_effort": "low"}, "takes thinking_budget"),
        ({**BASE, "thinking_budget": 2048}, "takes reasoning_effort"),
    ],
)
def test_a_reasoning_setting_the_contract_has_no_field_for_is_refused(config: dict[str, Any], takes: str) -> None:
    with pytest.raises(ConfigError, match=f"{takes}.*could change nothing"):
        model_identity(config)


def test_the_effort_joins_the_chat_templates_arguments_once() -> None:
    def settings(**values: Any) -> Any:
        return settings_from_config({"task": "t", **values})

    assert template_args(settings(reasoning_effort="low")) == {"reasoning_effort": "low"}
    both = settings(reasoning_effort="low", chat_template_args={"enable_thinking": True})
    assert template_args(both) == {"enable_thinking": True, "reasoning_effort": "low"}
    assert template_args(settings()) is None
    with pytest.raises(ConfigError, match="disagree"):
        template_args(settings(reasoning_effort="low", chat_template_args={"reasoning_effort": "high"}))
    with pytest.raises(ConfigError, match="reasoning_effort='max' is not allowed"):
        settings(reasoning_effort="max")


def chat(url: str) -> dict[str, Any]:
    return {"type": "openai_chat", "model": "m", "base_url": url, "retry_wait": 0.05}


def test_changing_the_effort_reruns_inference_and_nothing_else_does(api_run: Any) -> None:
    with ReasoningServer(lambda body: ("42", "adding", "stop")) as srv:
        run = {"task": "toy_gen", "limit": 3, "apply_chat_template": True}
        first, m1, _ = api_run(chat(srv.url), reasoning_effort="low", **run)
        _, m2, _ = api_run(chat(srv.url), reasoning_effort="low", **run)
        third, m3, _ = api_run(chat(srv.url), reasoning_effort="high", **run)
        efforts = [b["reasoning_effort"] for b in srv.bodies]
    assert [m["inference"]["computed"] for m in (m1, m2, m3)] == [3, 0, 3]
    assert efforts == ["low"] * 3 + ["high"] * 3
    assert first["evalflow"]["reasoning_effort"] == "low" and third["evalflow"]["reasoning_effort"] == "high"
    assert "reasoning_effort" not in first["config"]["model_args"]  # lm-eval's config keys as they were


def test_an_effort_that_could_change_nothing_is_refused_before_any_model_call(api_run: Any) -> None:
    with pytest.raises(ConfigError, match=r"reasoning_effort=low, but model dummy's prompts use no chat template"):
        api_run({"type": "dummy"}, task="toy_gen", limit=2, reasoning_effort="low")
    with pytest.raises(ConfigError, match=r"thinking_budget=2048, but model dummy takes no thinking budget"):
        api_run({"type": "dummy"}, task="toy_gen", limit=2, thinking_budget=2048)
    with ChatRecorder("m") as rec:
        completions = {**chat(rec.url), "type": "openai_completions", "tokenizer_backend": None}
        with pytest.raises(ConfigError, match="openai_completions's prompts use no chat template"):
            api_run(completions, task="toy_gen", limit=2, reasoning_effort="low")
        with pytest.raises(ConfigError, match="model config .* has no key 'reasoning_effort'"):  # a run setting only
            api_run({**chat(rec.url), "reasoning_effort": "low"}, task="toy_gen", limit=2, reasoning_effort="low")
    assert rec.bodies == []


def test_the_effort_reaches_a_rendered_chat_template(tmp_path: Path) -> None:
    """hf and vllm (and openai_completions) render the template evalflow applies: the effort is one
    of its keyword arguments there, so it keys the prompts (and the answers through them)."""
    from evalflow.run.phases import chat_format
    from tests.support import served

    if served.missing():
        pytest.skip(f"no SmolLM2 GGUF: {served.missing()}")
    config = {
        "type": "openai_completions",
        "model": "m",
        "base_url": "http://h:1/v1",
        "tokenizer": str(served.gguf_file()),
    }
    settings = settings_from_config(
        {"task": "t", "model": config, "apply_chat_template": True, "reasoning_effort": "low"}
    )
    assert chat_format(settings)["template_args"] == {"reasoning_effort": "low"}


def test_an_effort_the_chat_template_never_reads_is_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """SmolLM2's template mentions no ``reasoning_effort``: the prompts, and so the answers, are the
    same with it; the run says so rather than leave "inference re-ran, 0 new requests" to puzzle over.
    A template that reads the argument gets no such line."""
    from evalflow.run.phases import chat_format

    reads = tmp_path / "reads"
    reads.mkdir()
    template = (
        "{% for m in messages %}{{ m.content }}{% endfor %}{% if reasoning_effort %}[{{ reasoning_effort }}]{% endif %}"
    )
    (reads / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    ignores = tmp_path / "ignores"
    ignores.mkdir()
    (ignores / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages[0].content }}"}))
    config = {"type": "openai_completions", "model": "m", "base_url": "http://h:1/v1"}
    for folder, warned in ((reads, False), (ignores, True)):
        caplog.clear()
        settings = settings_from_config(
            {
                "task": "t",
                "model": {**config, "tokenizer": str(folder)},
                "apply_chat_template": True,
                "reasoning_effort": "low",
            }
        )
        with caplog.at_level("WARNING"):
            assert chat_format(settings)["template_args"] == {"reasoning_effort": "low"}
        said = [r.getMessage() for r in caplog.records if "never reads 'reasoning_effort'" in r.getMessage()]
        assert bool(said) == warned, said
