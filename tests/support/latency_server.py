"""A loopback OpenAI-compatible ``/v1/completions`` server with a fixed latency and no compute, for
the pooling / several-servers tests and ``benchmarks/suite_throughput.py``.

    server = LatencyServer(latency=0.05).start()       # server.url -> http://127.0.0.1:PORT/v1
    ...
    server.stop()

Answers depend on the prompt only (the same on every server): an echo request (``echo: true``)
gets one log-probability per prompt token, ``-((31 * token + 7 * position) % 97 + 1) / 50``, each the
top entry of its ``top_logprobs`` (so every continuation is greedy), plus one generated token; a
generation gets ``" answer N"`` with N from the prompt's tokens. Prompts are token ids
(``tokenized_requests=true``) or text (its UTF-8 bytes are the tokens).

Each answer leaves ``latency`` seconds after its request arrived (its first bytes were read), as
close to then as one thread allows: requests come in bursts (``num_concurrent`` sent together, so
due together ``latency`` later), and answers due together go out one after another, so every
microsecond spent per answer at its due time delays the rest of its burst, for any client. Hence
"no compute" includes the HTTP layer: HTTP/1.1 (keep-alive, pipelining) on an ``asyncio.Protocol``
with ``httptools`` (uvicorn's C parser), no per-request coroutine; and each answer is built during
its latency (as a real server computes during its own), leaving only the write for its due time.
The same work per request for every client, byte-identical answers. Under ``aiohttp.web``, building
answers when due, the server spent ~0.3 ms of CPU per request and its answers left 3-5 ms late on
average (32 in flight, a loaded 2-core machine); now ~0.19 ms and ~1 ms (``/stats``' ``late``).

What it reports, as events a test reads (never timings): ``answered``, ``max_in_flight``, and
``starved``: with ``hold_until=K`` a request is answered only once K requests are in flight (the
oldest first), so a client that lets its requests drain below K before sending more makes the
server wait; after ``starve_seconds`` it answers what it holds and counts each as starved. A
client that keeps K in flight until its last requests leaves at most K-1 starved (the run's tail).
``die_after=N``: after its N-th answer the server stops listening and drops every request in
flight or arriving later without an answer, as a killed server does. ``record=True`` keeps each
completion request's body (``GET /recorded``: the JSON list of them since the last ``/reset``), so
the benchmark can replay a run's exact requests from a bare client. ``GET /stats``: answered, the
``time.monotonic()`` of the first completion request's arrival and of the last answer, max in flight,
and ``late``: the seconds by which answers left after their due time, summed (the server's own
queueing: answers due together go out one after another; from when the server read each request).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httptools
import orjson

LOGPROBS = tuple(-(k + 1) / 50 for k in range(97))  # a constant of the formula, not of any request


def logprob(token: int, position: int) -> float:
    return LOGPROBS[(31 * token + 7 * position) % 97]  # -((31 * token + 7 * position) % 97 + 1) / 50


def _tokens(prompt: Any) -> list[int]:
    return list(prompt.encode()) if isinstance(prompt, str) else [int(t) for t in prompt]


def _prompts(body: dict[str, Any]) -> list[Any]:
    prompt = body["prompt"]
    if isinstance(prompt, str) or (prompt and isinstance(prompt[0], int)):
        return [prompt]
    return list(prompt)


def choice(index: int, prompt: Any, echo: bool) -> dict[str, Any]:
    """One prompt's answer; echoed, one entry per token (the first has no log-probability) + "g"."""
    tokens = _tokens(prompt)
    if not echo:
        return {"index": index, "text": f" answer {sum(tokens) % 7}", "finish_reason": "stop"}
    names = [str(t) for t in tokens] + ["g"]
    values: list[float | None] = (
        [None] + [LOGPROBS[(31 * t + 7 * i) % 97] for i, t in enumerate(tokens[1:], 1)] + [-0.5]
    )
    tops: list[dict[str, float] | None] = [None] + [{n: v} for n, v in zip(names[1:], values[1:])]  # type: ignore[misc]
    return {
        "index": index,
        "text": "g",
        "logprobs": {
            "tokens": names,
            "token_logprobs": values,
            "top_logprobs": tops,
            "text_offset": list(range(len(names))),
        },
        "finish_reason": "length",
    }


def answer(body: dict[str, Any], model: str) -> bytes:
    """The JSON answer to a completion request's body."""
    echo = bool(body.get("echo"))
    return orjson.dumps(
        {
            "object": "text_completion",
            "model": model,
            "choices": [choice(i, p, echo) for i, p in enumerate(_prompts(body))],
        }
    )


STATUS = {200: b"200 OK", 400: b"400 Bad Request", 404: b"404 Not Found", 405: b"405 Method Not Allowed"}


def response(status: int, body: bytes, keep_alive: bool) -> bytes:
    """An HTTP/1.1 response with a JSON body."""
    close = b"" if keep_alive else b"Connection: close\r\n"
    return (
        b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n"
        % (STATUS[status], len(body), close)
    ) + body


@dataclass(eq=False)
class Exchange:
    """One request on a connection, its answer once ready (``None``: not yet), in arrival order."""

    conn: Connection
    arrival: float  # time.monotonic() when its first bytes were read
    keep_alive: bool
    out: bytes | None = None
    body: dict[str, Any] = field(default_factory=dict, repr=False)  # a completion's request
    answer: tuple[int, bytes] | None = field(default=None, repr=False)  # its status and JSON, once built
    starve: asyncio.TimerHandle | None = field(default=None, repr=False)  # while held (hold_until)


class Connection(asyncio.Protocol):
    """HTTP/1.1 on one connection: ``httptools`` calls ``on_*`` as it parses; answers go out in order."""

    def __init__(self, server: LatencyServer) -> None:
        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.waiting: deque[Exchange] = deque()
        self.url = b""
        self.body: list[bytes] = []
        self.arrival = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.server.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.waiting.append(Exchange(self, time.monotonic(), False))
            self.respond(self.waiting[-1], 400, b'{"error":{"message":"bad request"}}')

    def on_message_begin(self) -> None:
        self.arrival, self.url, self.body = time.monotonic(), b"", []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        exchange = Exchange(self, self.arrival, self.parser.should_keep_alive())
        self.waiting.append(exchange)
        self.server.route(exchange, self.parser.get_method(), self.url, b"".join(self.body))

    def respond(self, exchange: Exchange, status: int, body: bytes) -> None:
        """Send ``exchange``'s answer once every earlier request on this connection has had its own."""
        exchange.out = response(status, body, exchange.keep_alive)
        while self.waiting and self.waiting[0].out is not None and self.transport is not None:
            done = self.waiting.popleft()
            self.transport.write(done.out)  # type: ignore[arg-type]
            if not done.keep_alive:
                self.transport.close()  # its answer still goes out; nothing after it does
                self.transport = None

    def drop(self) -> None:
        """Close without answering anything, as a killed server's connections end."""
        if self.transport is not None:
            self.transport.abort()


class LatencyServer:
    def __init__(
        self,
        latency: float = 0.05,
        *,
        model: str = "loopback",
        hold_until: int = 0,
        starve_seconds: float = 1.0,
        die_after: int | None = None,
        record: bool = False,
    ) -> None:
        self.latency, self.model, self.hold_until = latency, model, hold_until
        self.starve_seconds, self.die_after = starve_seconds, die_after
        self.answered = self.in_flight = self.max_in_flight = self.starved = 0
        self.dead = False
        self.recorded: list[bytes] | None = [] if record else None
        self.first: float | None = None  # time.monotonic() of the first completion request, and of the last answer
        self.last: float | None = None
        self.late = 0.0  # seconds, summed over answers, from the due time (arrival + latency) to written
        self.died = threading.Event()  # set when the server has died (die_after)
        self.connections: set[Connection] = set()
        self._held: deque[Exchange] = deque()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self._routes: dict[tuple[bytes, bytes], Callable[[Exchange, bytes], None]] = {
            (b"POST", b"/v1/completions"): self._completion,
            (b"GET", b"/v1/models"): self._models,
            (b"GET", b"/stats"): self._stats,
            (b"POST", b"/reset"): self._reset,
            (b"GET", b"/recorded"): self._recorded,
        }

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LatencyServer:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True, name="latency-server")
        self._thread.start()
        ready.wait()
        return self

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(self._loop.create_server(lambda: Connection(self), "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        ready.set()
        self._loop.run_forever()

    def route(self, exchange: Exchange, method: bytes, url: bytes, body: bytes) -> None:
        if self.dead:
            return exchange.conn.drop()
        path = url.split(b"?")[0]
        handler = self._routes.get((method, path))
        if handler is None:
            known = any(known_path == path for _, known_path in self._routes)
            status = 405 if known else 404
            return exchange.conn.respond(exchange, status, b'{"error":{"message":"%s"}}' % STATUS[status])
        handler(exchange, body)

    def _json(self, exchange: Exchange, value: Any) -> None:
        exchange.conn.respond(exchange, 200, orjson.dumps(value))

    def _stats(self, exchange: Exchange, body: bytes) -> None:
        self._json(
            exchange,
            {
                "answered": self.answered,
                "first": self.first,
                "last": self.last,
                "max_in_flight": self.max_in_flight,
                "late": self.late,
            },
        )

    def _reset(self, exchange: Exchange, body: bytes) -> None:
        self.answered = self.max_in_flight = 0
        self.first = self.last = None
        self.late = 0.0
        if self.recorded is not None:
            self.recorded.clear()
        self._json(exchange, {})

    def _recorded(self, exchange: Exchange, body: bytes) -> None:
        exchange.conn.respond(exchange, 200, b"[" + b",".join(self.recorded or []) + b"]")

    def _models(self, exchange: Exchange, body: bytes) -> None:
        self._json(exchange, {"object": "list", "data": [{"id": self.model, "object": "model"}]})

    def _completion(self, exchange: Exchange, raw: bytes) -> None:
        if self.recorded is not None:
            self.recorded.append(raw)
        try:
            exchange.body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return exchange.conn.respond(exchange, 400, b'{"error":{"message":"the body is not JSON"}}')
        if self.first is None:
            self.first = exchange.arrival
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self._loop.call_soon(self._build, exchange)  # after the requests read with it have their arrival times
        wait = exchange.arrival + self.latency - time.monotonic()
        self._loop.call_later(max(wait, 0.0), self._ripe, exchange)

    def _build(self, exchange: Exchange) -> None:
        """The answer, built during the latency as a real server computes it: when it is due, only
        the write is left, so answers due together do not wait for each other's building."""
        if exchange.answer is None:
            try:
                exchange.answer = (200, answer(exchange.body, self.model))
            except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
                exchange.answer = (400, orjson.dumps({"error": {"message": f"bad completion request: {exc!r}"}}))

    def _ripe(self, exchange: Exchange) -> None:
        """The latency has passed: answer, or (``hold_until``) hold until enough are in flight."""
        if not self.hold_until:
            return self._answer(exchange)
        exchange.starve = self._loop.call_later(self.starve_seconds, self._starve, exchange)
        self._held.append(exchange)
        if self.in_flight >= self.hold_until:
            oldest = self._held.popleft()
            oldest.starve.cancel()  # type: ignore[union-attr]
            self._answer(oldest)

    def _starve(self, exchange: Exchange) -> None:
        self.starved += 1
        self._held.remove(exchange)
        self._answer(exchange)

    def _answer(self, exchange: Exchange) -> None:
        self.in_flight -= 1
        if self.dead:
            return exchange.conn.drop()
        self._build(exchange)
        exchange.conn.respond(exchange, *exchange.answer)  # type: ignore[misc]
        self.answered += 1
        self.last = time.monotonic()
        self.late += self.last - exchange.arrival - self.latency
        if self.die_after is not None and self.answered >= self.die_after:
            self._die()

    def _die(self) -> None:
        self.dead = True
        if self._server is not None:
            self._server.close()  # stops listening; open connections are dropped as their requests come
        self.died.set()

    def stop(self) -> None:
        """Close the listening socket and every connection, end the loop and its thread."""

        def end() -> None:
            if self._server is not None:
                self._server.close()
            for conn in list(self.connections):
                conn.drop()
            self._loop.call_soon(self._loop.stop)

        if self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(end)
            self._thread.join(timeout=10)
            if not self._thread.is_alive():
                self._loop.close()


def build_tokenizer(folder: Any) -> str:
    """A small byte-level BPE tokenizer saved in ``folder`` (a client-side ``model.tokenizer``)."""
    from pathlib import Path

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    folder = Path(folder)
    if (folder / "tokenizer_config.json").is_file():
        return str(folder)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ["Question: What is the answer? Answer: the quick brown fox jumps over the lazy dog 0123456789"] * 4
    tok.train_from_iterator(
        corpus, trainer=trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "</s>"], show_progress=False)
    )
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>").save_pretrained(str(folder))
    return str(folder)


if __name__ == "__main__":  # a server in its own process, for the benchmark: prints its URL
    import argparse
    import os
    import signal
    import stat
    import sys

    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--model", default="loopback")
    parser.add_argument("--record", action="store_true", help="keep request bodies for GET /recorded")
    args = parser.parse_args()
    server = LatencyServer(args.latency, model=args.model, record=args.record).start()
    print(server.url, flush=True)
    # with a pipe for stdin (the benchmark's), it runs until the pipe closes: the parent's end closes
    # when the parent exits, however it ends (SIGKILL too), so it never outlives the benchmark; else
    # (a shell's background job) until SIGTERM or SIGINT
    if stat.S_ISFIFO(os.fstat(sys.stdin.fileno()).st_mode):
        sys.stdin.read()
    else:
        signal.sigwait({signal.SIGTERM, signal.SIGINT})
    sys.exit(0)
