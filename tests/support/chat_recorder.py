"""A loopback stand-in for an OpenAI-compatible chat server that records every request body.

    with ChatRecorder("tiny-vlm") as rec:      # rec.url -> http://127.0.0.1:PORT/v1
        ...                                    # point openai_chat or lm-eval's local-chat-completions at it
    rec.bodies                                 # every POST body, parsed, in arrival order

``/v1/models`` lists the one model; ``/v1/chat/completions`` answers a text derived from the
body's hash, so both clients get the same answer for the same body and different ones otherwise.
A path ending in ``/messages`` answers in Anthropic's Messages shape (``content[].text``).
``rec.requests`` holds each POST's path and headers too.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tests.support.loopback_json import JsonHandler, LoopbackJsonServer


class ChatRecorder(LoopbackJsonServer):
    def __init__(self, model: str) -> None:
        self.model = model
        self.bodies: list[Any] = []
        self.requests: list[tuple[str, dict[str, str]]] = []  # each POST's path and headers

    def handler(self) -> type[JsonHandler]:
        rec = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                self.reply({"object": "list", "data": [{"id": rec.model, "object": "model"}]})

            def do_POST(self) -> None:
                raw = self.body()
                rec.bodies.append(json.loads(raw))
                rec.requests.append((self.path, dict(self.headers.items())))
                text = "answer " + hashlib.sha256(raw).hexdigest()[:8]
                if self.path.endswith("/messages"):
                    self.reply({"type": "message", "role": "assistant", "content": [{"type": "text", "text": text}]})
                    return
                self.reply(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "model": rec.model,
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                        ],
                    }
                )

        return Handler
