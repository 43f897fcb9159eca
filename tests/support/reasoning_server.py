"""A loopback chat server scripted as a reasoning model's server answers: ``message.content`` beside
``message.reasoning_content`` (vLLM's and SGLang's reasoning parsers, llama.cpp's
``--reasoning-format``), a ``finish_reason`` with vLLM's ``stop_reason``, and ``usage`` with
``completion_tokens_details.reasoning_tokens``.

    with ReasoningServer(choose) as srv:     # choose(body) -> (content, reasoning, finish_reason[, stop_reason])
        ... srv.url ...                      # http://127.0.0.1:PORT/v1 ; srv.bodies: every POST body
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.support.loopback_json import JsonHandler, LoopbackJsonServer

Script = Callable[[dict[str, Any]], tuple[Any, ...]]  # reasoning_answer's arguments after the model


def reasoning_answer(
    model: str, content: str | None, reasoning: str | None, finish_reason: str, stop_reason: str | None = None
) -> dict[str, Any]:
    """One chat completion as vLLM's reasoning parser returns it (``stop_reason``: the stop string
    matched, None at EOS); token counts are word counts."""
    thought = len((reasoning or "").split())
    return {
        "id": "x",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": finish_reason,
                "stop_reason": stop_reason,
                "message": {"role": "assistant", "content": content, "reasoning_content": reasoning},
            }
        ],
        "usage": {
            "prompt_tokens": 7,
            "completion_tokens": thought + len((content or "").split()),
            "completion_tokens_details": {"reasoning_tokens": thought},
        },
    }


class ReasoningServer(LoopbackJsonServer):
    def __init__(self, script: Script, model: str = "m") -> None:
        self.script, self.model = script, model
        self.bodies: list[dict[str, Any]] = []

    def handler(self) -> type[JsonHandler]:
        srv = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                self.reply({"object": "list", "data": [{"id": srv.model, "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.body())
                srv.bodies.append(body)
                self.reply(reasoning_answer(srv.model, *srv.script(body)))

        return Handler
