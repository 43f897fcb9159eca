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

What it reports, as events a test reads (never timings): ``answered``, ``max_in_flight``, and
``starved``: with ``hold_until=K`` a request is answered only once K requests are in flight (the
oldest first), so a client that lets its requests drain below K before sending more makes the
server wait; after ``starve_seconds`` it answers what it holds and counts each as starved. A
client that keeps K in flight until its last requests leaves at most K-1 starved (the run's tail).
``die_after=N``: after its N-th answer the server stops listening and drops every request in
flight or arriving later without an answer, as a killed server does. ``record=True`` keeps each
completion request's body (``GET /recorded``: the JSON list of them since the last ``/reset``), so
the benchmark can replay a run's exact requests from a bare client.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import orjson
from aiohttp import web


def logprob(token: int, position: int) -> float:
    return -(((31 * token + 7 * position) % 97) + 1) / 50


def _tokens(prompt: Any) -> list[int]:
    return list(prompt.encode()) if isinstance(prompt, str) else [int(t) for t in prompt]


def _prompts(body: dict[str, Any]) -> list[Any]:
    prompt = body["prompt"]
    if isinstance(prompt, str) or (prompt and isinstance(prompt[0], int)):
        return [prompt]
    return list(prompt)


def choice(index: int, prompt: Any, echo: bool) -> dict[str, Any]:
    tokens = _tokens(prompt)
    if not echo:
        return {"index": index, "text": f" answer {sum(tokens) % 7}", "finish_reason": "stop"}
    values: list[float | None] = [None] + [logprob(t, i) for i, t in enumerate(tokens) if i > 0] + [-0.5]
    names = [str(t) for t in tokens] + ["g"]
    tops: list[dict[str, float] | None] = [None] + [{n: v} for n, v in zip(names[1:], values[1:]) if v is not None]
    return {"index": index, "text": "g", "logprobs": {"tokens": names, "token_logprobs": values,
            "top_logprobs": tops, "text_offset": list(range(len(names)))}, "finish_reason": "length"}


class LatencyServer:
    def __init__(self, latency: float = 0.05, *, model: str = "loopback", hold_until: int = 0,
                 starve_seconds: float = 1.0, die_after: int | None = None, record: bool = False) -> None:
        self.latency, self.model, self.hold_until = latency, model, hold_until
        self.starve_seconds, self.die_after = starve_seconds, die_after
        self.answered = self.in_flight = self.max_in_flight = self.starved = 0
        self.dead = False
        self.recorded: list[bytes] | None = [] if record else None
        self.first: float | None = None  # loop time of the first completion request, and of the last answer
        self.last: float | None = None
        self.died = threading.Event()  # set when the server has died (die_after)
        self._held: list[asyncio.Future[None]] = []
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "LatencyServer":
        ready = threading.Event()
        threading.Thread(target=self._serve, args=(ready,), daemon=True, name="latency-server").start()
        ready.wait()
        return self

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/stats", self._stats)  # the benchmark's window: first request to last answer
        app.router.add_post("/reset", self._reset)
        app.router.add_get("/recorded", self._recorded)
        self._runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        ready.set()
        self._loop.run_forever()

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response({"answered": self.answered, "first": self.first, "last": self.last,
                                  "max_in_flight": self.max_in_flight})

    async def _reset(self, request: web.Request) -> web.Response:
        self.answered = self.max_in_flight = 0
        self.first = self.last = None
        if self.recorded is not None:
            self.recorded.clear()
        return web.json_response({})

    async def _recorded(self, request: web.Request) -> web.Response:
        return web.Response(body=b"[" + b",".join(self.recorded or []) + b"]", content_type="application/json")

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model"}]})

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = orjson.loads(raw)
        if self.recorded is not None:
            self.recorded.append(raw)
        if self.dead:
            return self._drop(request)
        if self.first is None:
            self.first = self._loop.time()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.latency)
            if self.hold_until:
                await self._hold()
        finally:
            self.in_flight -= 1
        if self.dead:
            return self._drop(request)
        answer = {"object": "text_completion", "model": self.model,
                  "choices": [choice(i, p, bool(body.get("echo"))) for i, p in enumerate(_prompts(body))]}
        response = web.Response(body=orjson.dumps(answer), content_type="application/json")  # the cheap encoder: no compute
        await response.prepare(request)
        await response.write_eof()
        self.answered += 1
        self.last = self._loop.time()
        if self.die_after is not None and self.answered >= self.die_after:
            await self._die()
        return response

    async def _hold(self) -> None:
        """Wait until ``hold_until`` requests are in flight (or ``starve_seconds``); then the oldest goes."""
        mine: asyncio.Future[None] = self._loop.create_future()
        self._held.append(mine)
        if self.in_flight >= self.hold_until:
            self._held.pop(0).set_result(None)
        try:
            await asyncio.wait_for(asyncio.shield(mine), self.starve_seconds)
        except asyncio.TimeoutError:
            self.starved += 1
            if mine in self._held:
                self._held.remove(mine)

    def _drop(self, request: web.Request) -> web.StreamResponse:
        if request.transport is not None:
            request.transport.abort()
        return web.Response(status=500)  # never sent: the connection is gone

    async def _die(self) -> None:
        self.dead = True
        if self._runner is not None:
            for site in list(self._runner.sites):
                await site.stop()
        self.died.set()

    def stop(self) -> None:
        async def end() -> None:
            if self._runner is not None:
                await self._runner.cleanup()

        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(end(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)


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
    tok.train_from_iterator(corpus, trainer=trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "</s>"],
                                                                show_progress=False))
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
