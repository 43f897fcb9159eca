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
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatRecorder:
    def __init__(self, model: str) -> None:
        self.model = model
        self.bodies: list[Any] = []
        self.requests: list[tuple[str, dict[str, str]]] = []  # each POST's path and headers
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ChatRecorder:
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._reply({"object": "list", "data": [{"id": rec.model, "object": "model"}]})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                rec.bodies.append(json.loads(raw))
                rec.requests.append((self.path, dict(self.headers.items())))
                text = "answer " + hashlib.sha256(raw).hexdigest()[:8]
                if self.path.endswith("/messages"):
                    self._reply({"type": "message", "role": "assistant", "content": [{"type": "text", "text": text}]})
                    return
                self._reply(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "model": rec.model,
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                        ],
                    }
                )

            def _reply(self, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self.server is not None
        self.server.shutdown()
        self.server.server_close()
