"""A JSON server on 127.0.0.1 for tests that script an HTTP API (chat_recorder, tokenizer_server):
the handler's reply and the server's start and stop written once.

    class MyServer(LoopbackJsonServer):
        def handler(self) -> type[JsonHandler]: ...      # a JsonHandler subclass, closing over self
    with MyServer() as srv: ... srv.url ...              # http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet request handler whose answers are JSON."""

    def log_message(self, *args: Any) -> None:
        pass

    def body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def reply(self, payload: Any, status: int = 200) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class LoopbackJsonServer:
    """Serves :meth:`handler`'s class on a free loopback port inside ``with``."""

    server: ThreadingHTTPServer | None = None

    def handler(self) -> type[JsonHandler]:
        raise NotImplementedError

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> Any:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self.server is not None
        self.server.shutdown()
        self.server.server_close()
