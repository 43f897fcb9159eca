"""Stop reasons and token counts from the real llama.cpp server of ../shared/serve
(llama-cpp-python 0.3.36 on SmolLM2): a GBNF grammar forces a thinking-shaped answer
(``<think>…</think>`` then digits), so both a finished thought and one cut by ``max_gen_toks``
are exact cases on a real model.

That server has no reasoning parser (llama-cpp-python has no ``--reasoning-format``; llama.cpp's own
``llama-server`` is not installed here), so it never splits a ``reasoning_content`` off: the thinking
stays in ``content`` and ``model.think_end_token`` splits it client-side, as lm-eval's chat model does.
A served ``reasoning_content`` is tested against a scripted server (test_finishes.py)."""

from __future__ import annotations

import json
from typing import Any

from evalflow.core.records import Request
from evalflow.models.registry import build_model
from tests.support import served
from tests.support.api_runs import chat_config, completions_config

THINKING = 'root ::= "<think>" [a-z ]{1,8} "</think>" [0-9]{1,2}'  # a grammar llama.cpp completes, then EOS


def ask(model: Any, prompt: str, max_gen_toks: int) -> Any:
    gen_kwargs = {"until": ["\n\n"], "max_gen_toks": max_gen_toks, "grammar": THINKING}
    (answer,) = model.generate_until([Request("generate_until", (prompt, gen_kwargs))])
    return answer


def test_a_real_servers_thinking_answers_stop_or_hit_the_cap_with_their_usage(fixed_server: served.LlamaServer) -> None:
    chat = build_model(chat_config(fixed_server.url, think_end_token="</think>"))
    prompt = json.dumps([{"role": "user", "content": "What is 2+2?"}])
    done = ask(chat, prompt, 64)
    assert done.finish.stop_reason == "stop"  # llama-cpp-python says "stop" for EOS and stop strings alike
    assert done.finish.reasoning.startswith("<think>") and done.text.isdigit()  # the part lm-eval drops, kept
    assert done.finish.prompt_tokens > 0 and 0 < done.finish.completion_tokens < 64
    cut = ask(chat, prompt, 3)
    assert (cut.finish.stop_reason, cut.finish.completion_tokens, cut.finish.reasoning) == ("length", 3, None)
    assert "<think>".startswith(cut.text) and cut.text  # unclosed: lm-eval scores the whole text
    completions = build_model(completions_config(fixed_server.url))
    short = ask(completions, "Question: 2+2?\nAnswer:", 2)
    assert (short.finish.stop_reason, short.finish.completion_tokens) == ("length", 2)
