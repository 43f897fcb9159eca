"""A loopback HTTP proxy in front of a real server that injects faults and records what it is sent.

    proxy = FaultProxy("http://127.0.0.1:8080", faults=["429", "500", "stall", "drop"])
    proxy.start()                  # proxy.url -> http://127.0.0.1:PORT
    ...                            # point a client at proxy.url + "/v1"
    proxy.stop()

Each POST takes the next fault from ``faults`` (then forwards normally once they are used up):
``"ok"`` forwards, ``"429"`` answers 429 with ``Retry-After: 1``, ``"500"`` answers 500, ``"400"``
answers 400 (not worth a retry), ``"401"`` answers 401 (a wrong API key), ``"stall"`` waits
``stall_seconds`` (past the client's timeout) before closing, ``"drop"`` closes the connection
without an answer. ``bodies`` holds every POST body received, ``answered`` those forwarded and
answered 200 by the upstream server, ``headers`` the headers of every request. ``stop()`` closes the
listening socket, so later connections are refused, as for a stopped server. ``before_each`` (path,
body): a request POSTed upstream, unrecorded, right before each forwarded POST, the pair serialised
(the parity harness resets llama.cpp's reused prompt prefix with it, since the server's greedy
output depends on that cache state). Also used by ``benchmarks/api_parity.py`` to capture the
request bodies lm-eval and evalflow send.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FaultProxy:
    def __init__(self, upstream: str, faults: list[str] | None = None, stall_seconds: float = 3.0) -> None:
        self.upstream = upstream.rstrip("/")
        self.models_missing = False  # True: GET /v1/models answers 404, as on some hosted APIs
        self.faults = list(faults or [])
        self.stall_seconds = stall_seconds
        self.bodies: list[Any] = []
        self.answered: list[Any] = []
        self.faults_served: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.before_each: tuple[str, bytes] | None = None
        self._upstream_lock = threading.Lock()  # before_each and its request go upstream as one pair
        self.server: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> FaultProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                with proxy.lock:
                    proxy.headers.append(dict(self.headers))
                if proxy.models_missing:
                    return self._reply(404, b'{"error": {"message": "no such route"}}')
                self._forward(None)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"null")
                with proxy.lock:
                    proxy.bodies.append(body)
                    proxy.headers.append(dict(self.headers))
                    fault = proxy.faults.pop(0) if proxy.faults else None
                    if fault and fault != "ok":
                        proxy.faults_served.append(fault)
                if fault == "429":
                    return self._reply(429, b'{"error": {"message": "rate limited"}}', {"Retry-After": "1"})
                if fault == "500":
                    return self._reply(500, b'{"error": {"message": "injected server error"}}')
                if fault == "400":
                    return self._reply(400, b'{"error": {"message": "injected bad request"}}')
                if fault == "401":
                    return self._reply(401, b'{"error": {"message": "Incorrect API key provided"}}')
                if fault == "stall":
                    time.sleep(proxy.stall_seconds)
                    self.close_connection = True
                    return
                if fault == "drop":
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                if proxy.before_each is None:
                    return self._forward(raw, body)
                with proxy._upstream_lock:
                    path, first = proxy.before_each
                    _call(proxy.upstream + path, "POST", first)
                    self._forward(raw, body)

            def _forward(self, raw: bytes | None, body: Any = None) -> None:
                status, data = _call(proxy.upstream + self.path, self.command, raw)
                if status == 200 and raw is not None:
                    with proxy.lock:
                        proxy.answered.append(body)
                self._reply(status, data)

            def _reply(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def _call(url: str, method: str, raw: bytes | None) -> tuple[int, bytes]:
    """One upstream request: (status, body); 502 when the upstream is gone."""
    req = urllib.request.Request(url, data=raw, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError as e:  # upstream gone
        return 502, json.dumps({"error": {"message": f"upstream: {e}"}}).encode()
