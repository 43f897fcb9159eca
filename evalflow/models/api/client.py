"""Sending request bodies to an OpenAI-compatible server: ``num_concurrent`` in flight, retries.

aiohttp's client session holds the connections (one per server; lm-eval's own client, and about a
fifth of httpx's CPU time per request, which decides the throughput of a fast server with many
requests in flight); tenacity retries a request on connection errors,
timeouts, HTTP 429 (waiting what ``Retry-After`` says) and 5xx, with exponential backoff and jitter,
never on other 4xx (a bad request stays bad). Each answer is handed to ``on_answer`` the moment it
arrives, so the caller can persist it: a kill or a final failure loses nothing already answered.
After a final failure no new request is started, the ones in flight are let finish, and
:class:`ServerError` names the server's message and how many requests were answered.

Only imported when a request must really be sent: a fully cached run never imports aiohttp.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import re
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evalflow.errors import ModelError
from evalflow.models.api.server_settings import ApiSettings

try:
    import aiohttp
    import orjson
    import tenacity
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ModelError(
        f"the openai_completions / openai_chat models need the 'api' extra ({exc.name} is missing): "
        "pip install 'evalflow[api]'"
    ) from None

from evalflow.models.api.slots import Slots
from evalflow.models.api.transport import Reply, read_reply, shut_down

log = logging.getLogger(__name__)

MAX_BACKOFF = 30.0  # seconds; the longest wait between attempts unless the server asks for more


class ServerError(ModelError):
    """A request still failed after every retry, or was refused (4xx)."""


class RefusedError(ServerError):
    """The server answered 4xx (other than 429): the request itself is wrong; never retried."""


class _Retryable(Exception):
    """A failure worth another attempt; ``retry_after`` is the server's wish in seconds, if any."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: a number, or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time()) if when else None


def _server_message(response: Reply) -> str:
    text = response.text.strip().replace("\n", " ")
    return f"HTTP {response.status_code}: {text[:500] or response.reason_phrase}"


# A server's own validation of the request body (pydantic/FastAPI, as in vLLM and llama-cpp-python,
# which reports it as HTTP 500): deterministic, so retrying it only delays the error.
_VALIDATION = re.compile(r"validation error|Input should be|'loc': \(|\"loc\": \[|invalid_request_error")


def is_validation_error(body: str) -> bool:
    """Whether a 5xx answer's body is the server's validation of the request, not a passing fault."""
    return bool(_VALIDATION.search(body))


class _Down(Exception):
    """A server that cannot be reached (or failed every retry) while another one is still live:
    the request is sent to another server instead, and this one takes no more."""


class ApiClient:
    """Posts JSON bodies to one or several servers (``model.base_url`` a list) that serve the same
    model; the API key is read from the environment per request.

    One event loop, in a helper thread, holds every connection and ``num_concurrent`` request
    slots per server, shared by every caller: several chunks posted at once from several threads
    keep the servers' slots full between chunks (and tasks) instead of draining at each boundary.
    A request takes the first free slot of any live server. A server whose connection fails (or
    that fails every retry) while another is live is marked dead: its in-flight requests are sent
    again to the others and it gets no new ones. With ``failover_only`` only the first live
    server has slots (each Ray replica's own server), the next taking over when it dies.
    """

    def __init__(self, settings: ApiSettings) -> None:
        self.settings = settings
        self.urls = settings.root_urls
        self.answered = 0  # requests answered by this client, over its lifetime (for error messages)
        self.answered_by = dict.fromkeys(self.urls, 0)  # HTTP requests each server answered
        self.dead: set[int] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._start_lock = threading.Lock()
        self._slots: Slots | None = None
        self._http: dict[int, aiohttp.ClientSession] = {}
        self._halted = False  # a request failed for good: no batch starts another until all settle
        self._active = 0  # batches in progress

    def _headers(self) -> dict[str, str]:
        from evalflow.models.api.dialects import request_headers

        return request_headers(self.settings)

    def _timeout(self) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=self.settings.timeout)

    def _run(self, coro: Any) -> Any:
        """Run ``coro`` on the client's loop (started on first use) and wait for its result."""
        with self._start_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="api-client", daemon=True)
                thread.start()
                self._loop = loop
                # the sessions are closed (and the loop stopped) when the client goes, or at exit
                weakref.finalize(self, shut_down, loop, thread, self._http)
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # Ctrl-C or an error here: stop the requests of this call
            raise

    def _client(self, server: int) -> aiohttp.ClientSession:
        """The server's session (made on the loop, on first use): ``num_concurrent`` connections."""
        if server not in self._http:
            connector = aiohttp.TCPConnector(limit=self.settings.num_concurrent, ssl=self.settings.ssl())
            self._http[server] = aiohttp.ClientSession(connector=connector, timeout=self._timeout())
        return self._http[server]

    def _send(self, server: int, path: str, body: Mapping[str, Any] | None = None) -> Callable[[], Any]:
        """One GET (``body`` None) or POST of ``body`` to a server, as a coroutine factory (each
        retry sends again)."""
        url = self.urls[server] + path
        data = None if body is None else orjson.dumps(body)

        async def send() -> Reply:
            session = self._client(server)
            if body is None:
                async with session.get(url, headers=self._headers()) as response:
                    return await read_reply(response)
            async with session.post(url, data=data, headers=self._headers()) as response:
                return await read_reply(response)

        return send

    def live(self) -> list[int]:
        return [i for i in range(len(self.urls)) if i not in self.dead]

    def serving(self) -> list[int]:
        """The servers that take requests now: every live one, or the first (``failover_only``)."""
        live = self.live()
        return live[:1] if self.settings.failover_only else live

    def _queue(self) -> Slots:
        if self._slots is None:
            self._slots = Slots()
            for server in self.serving():
                self._open(server)
        return self._slots

    def _open(self, server: int) -> None:
        assert self._slots is not None
        for _ in range(self.settings.num_concurrent):
            self._slots.put(server)

    async def _take(self) -> int:
        queue = self._queue()
        while True:
            server = await queue.get()
            if server not in self.dead:  # a dead server's slots are dropped as they come up
                return server

    def _give(self, server: int) -> None:
        if server not in self.dead:
            self._queue().put(server)

    def _mark_dead(self, server: int, why: BaseException) -> None:
        was_serving = server in self.serving()
        self.dead.add(server)
        log.warning(
            "%s: %s; its requests go to the other server(s) (%s)",
            self.urls[server],
            why,
            ", ".join(self.urls[i] for i in self.live()),
        )
        if self.settings.failover_only and was_serving and self.live():
            self._open(self.live()[0])

    def get_json(self, path: str, server: int = 0) -> Any:
        """One GET (``/models``) to one server, with the same retries as the requests."""
        return self._run(self._get(server, path))

    async def _get(self, server: int, path: str) -> Any:
        url = self.urls[server]
        return await self._with_retries(self._send(server, path), path, url)

    def post_all(
        self,
        path: str,
        bodies: Sequence[Mapping[str, Any]],
        on_answer: Callable[[int, Any], None],
        read: Callable[[int, bytes], Any] | None = None,
    ) -> None:
        """POST every body to a server's ``root_url + path``, in the servers' shared slots;
        ``on_answer(i, answer)`` for each as it arrives, ``answer`` being ``read(i, body)`` (on the
        client's loop; default: the JSON, parsed whole; a body that is not JSON is retried).
        Raises :class:`ServerError` once the others have settled. Safe to call from several
        threads at once."""
        if bodies:
            self._run(self._post_all(path, bodies, on_answer, read))

    async def _post_all(
        self,
        path: str,
        bodies: Sequence[Mapping[str, Any]],
        on_answer: Callable[[int, Any], None],
        read: Callable[[int, bytes], Any] | None = None,
    ) -> None:
        if self._active == 0:
            self._halted = False
        self._active += 1
        failures: list[BaseException] = []
        answered_here: list[int] = []

        async def one(i: int) -> None:
            while not self._halted:
                server = await self._take()
                if self._halted:
                    self._give(server)
                    return
                url = self.urls[server]
                try:
                    answer = await self._with_retries(
                        self._send(server, path, bodies[i]),
                        path,
                        url,
                        fail_over=len(self.live()) > 1,
                        read=None if read is None else (lambda body: read(i, body)),
                    )
                except _Down as exc:
                    if len(self.live()) > 1:
                        self._mark_dead(server, exc)
                    else:  # the others died meanwhile: this one is retried as the last server
                        self._give(server)
                    continue
                except Exception as exc:
                    self._give(server)
                    failures.append(exc)
                    self._halted = True  # a request failed for good: start no new ones
                    return
                self._give(server)
                try:
                    on_answer(i, answer)
                except Exception as exc:
                    failures.append(exc)
                    self._halted = True
                    return
                self.answered += 1
                self.answered_by[url] += 1
                answered_here.append(i)
                return

        try:
            await asyncio.gather(*(one(i) for i in range(len(bodies))))
        finally:
            self._active -= 1
        if failures or len(answered_here) < len(bodies):
            done = len(answered_here)
            first = failures[0] if failures else ServerError("another batch's request failed for good.")
            fix = (
                "Fix what the message names"
                if isinstance(first, RefusedError)
                else "Fix the server (or raise model.max_retries or model.timeout)"
            )
            raise ServerError(
                f"{first} {done} of this batch's {len(bodies)} requests ({self.answered} in this run) were "
                f"answered and are saved in the cache. {fix} and run again: it resumes where this run stopped."
            )

    async def _with_retries(
        self,
        send: Callable[[], Any],
        path: str,
        url: str,
        fail_over: bool = False,
        read: Callable[[bytes], Any] | None = None,
    ) -> Any:
        """``send()`` with retries; ``fail_over``: a connection failure, or a final failure, is
        :class:`_Down` (another server takes the request) rather than retried or an error.

        The first attempt runs outside tenacity, whose set-up costs about as much CPU as the
        request itself; only a retryable failure builds the retry loop, which then counts that
        failure as its first attempt (same waits, log lines and attempt total)."""
        try:
            return await self._attempt(send, path, url, fail_over, read)
        except _Retryable as exc:
            first: _Retryable | None = exc
        s = self.settings
        # tenacity>=8.2's pieces (wait_exponential_jitter's `multiplier` is 9.2's)
        backoff = tenacity.wait_exponential(multiplier=s.retry_wait, max=MAX_BACKOFF) + tenacity.wait_random(
            0, s.retry_wait
        )

        def wait(state: tenacity.RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            after = getattr(exc, "retry_after", None)
            return after if after is not None else backoff(state)

        def before_sleep(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.warning(
                "%s%s: %s; retry %d of %d in %.1f s",
                url,
                path,
                exc,
                state.attempt_number,
                s.max_retries,
                state.next_action.sleep if state.next_action else 0.0,
            )

        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(s.max_retries + 1),
            wait=wait,
            retry=tenacity.retry_if_exception_type(_Retryable),
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    if first is not None:  # the attempt made above
                        failed, first = first, None
                        raise failed
                    return await self._attempt(send, path, url, fail_over, read)
        except _Retryable as exc:
            if fail_over:
                raise _Down(f"failed {s.max_retries + 1} time(s), the last with: {exc}") from None
            raise ServerError(
                f"the request to {url}{path} failed {s.max_retries + 1} time(s), the last with: {exc}."
            ) from None
        raise AssertionError("unreachable: tenacity either returns or raises")  # pragma: no cover

    async def _attempt(
        self, send: Callable[[], Any], path: str, url: str, fail_over: bool, read: Callable[[bytes], Any] | None = None
    ) -> Any:
        try:
            response = await send()
        except TimeoutError:  # aiohttp's timeouts subclass it
            raise _Retryable(f"no answer within model.timeout={self.settings.timeout:g} s") from None
        except aiohttp.ClientError as exc:  # refused, reset, dropped mid-answer
            if fail_over:  # refused or dropped: the server is gone, the others take the request now
                raise _Down(f"connection failed ({type(exc).__name__}: {exc or 'no detail'})") from None
            raise _Retryable(f"connection failed ({type(exc).__name__}: {exc or 'no detail'})") from None
        if response.status_code in (401, 403):
            env = self.settings.api_key_env
            state = "is set" if self.settings.api_key() else "is not set"
            raise RefusedError(
                f"the server at {url}{path} refused the API key with {_server_message(response)}. "
                f"The key is read from ${env}, which {state}: put a valid key with access to model.model "
                f"'{self.settings.model}' in it, or point model.api_key_env at the variable that holds one."
            )
        if response.status_code == 429 or response.status_code >= 500:
            if is_validation_error(response.text):  # the same request fails the same way: no retry
                raise RefusedError(self._validation_message(response, path, url))
            raise _Retryable(_server_message(response), _retry_after(response.headers.get("Retry-After")))
        if response.status_code >= 400:
            raise RefusedError(
                f"the server at {url}{path} refused the request with {_server_message(response)}. "
                "Check model.model, model.base_url and the API key variable (model.api_key_env)."
            )
        try:
            return response.json() if read is None else read(response.body)
        except orjson.JSONDecodeError:
            raise _Retryable(f"the answer is not JSON: {response.text[:200]!r}") from None

    def _validation_message(self, response: Reply, path: str, url: str) -> str:
        text = f"the server at {url}{path} rejected the request body with {_server_message(response)}"
        if "prompt" in response.text and self.settings.tokenized_requests:
            return (
                f"{text}. It does not take token ids as the prompt (llama.cpp's server is one such): set "
                "model.tokenized_requests=false to send text."
            )
        return f"{text}. The request is malformed for this server, so it is not retried; check the model settings."

    def post_one(self, path: str, body: Mapping[str, Any], server: int = 0) -> Any:
        """One POST with retries to one server (the alignment probe); its answer."""
        url = self.urls[server]
        return self._run(self._with_retries(self._send(server, path, body), path, url))
