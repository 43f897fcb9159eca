"""Sending request bodies to an OpenAI-compatible server: ``num_concurrent`` in flight, retries.

httpx's async client holds the connections; tenacity retries a request on connection errors,
timeouts, HTTP 429 (waiting what ``Retry-After`` says) and 5xx, with exponential backoff and jitter,
never on other 4xx (a bad request stays bad). Each answer is handed to ``on_answer`` the moment it
arrives, so the caller can persist it: a kill or a final failure loses nothing already answered.
After a final failure no new request is started, the ones in flight are let finish, and
:class:`ServerError` names the server's message and how many requests were answered.

Only imported when a request must really be sent: a fully cached run never imports httpx.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import re
import time
from typing import Any, Callable, Mapping, Sequence

from evalflow.errors import ModelError
from evalflow.models.api.settings import ApiSettings

try:
    import httpx
    import tenacity
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ModelError(
        f"the openai_completions / openai_chat models need the 'api' extra ({exc.name} is missing): "
        "pip install 'evalflow[api]'"
    ) from None

log = logging.getLogger(__name__)
logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per request otherwise

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


def _server_message(response: httpx.Response) -> str:
    text = response.text.strip().replace("\n", " ")
    return f"HTTP {response.status_code}: {text[:500] or response.reason_phrase}"


# A server's own validation of the request body (pydantic/FastAPI, as in vLLM and llama-cpp-python,
# which reports it as HTTP 500): deterministic, so retrying it only delays the error.
_VALIDATION = re.compile(r"validation error|Input should be|'loc': \(|\"loc\": \[|invalid_request_error")


def is_validation_error(body: str) -> bool:
    """Whether a 5xx answer's body is the server's validation of the request, not a passing fault."""
    return bool(_VALIDATION.search(body))


class ApiClient:
    """Posts JSON bodies to one server; the API key is read from the environment per request."""

    def __init__(self, settings: ApiSettings) -> None:
        self.settings = settings
        self.answered = 0  # requests answered by this client, over its lifetime (for error messages)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **self.settings.headers}
        key = self.settings.api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _timeout(self) -> httpx.Timeout:
        return httpx.Timeout(self.settings.timeout)

    def get_json(self, path: str) -> Any:
        """One GET (``/models``), with the same retries as the requests."""
        return asyncio.run(self._get(path))

    async def _get(self, path: str) -> Any:
        async with httpx.AsyncClient(timeout=self._timeout(), headers=self._headers()) as http:
            return await self._with_retries(lambda: http.get(self.settings.root_url + path), path)

    def post_all(
        self, path: str, bodies: Sequence[Mapping[str, Any]], on_answer: Callable[[int, Any], None]
    ) -> None:
        """POST every body to ``root_url + path``, ``num_concurrent`` at a time; ``on_answer(i,
        json)`` for each as it arrives. Raises :class:`ServerError` once the others have settled."""
        if bodies:
            asyncio.run(self._post_all(path, bodies, on_answer))

    async def _post_all(self, path: str, bodies: Sequence[Mapping[str, Any]], on_answer: Callable[[int, Any], None]) -> None:
        limit = self.settings.num_concurrent
        limits = httpx.Limits(max_connections=limit, max_keepalive_connections=limit)
        gate = asyncio.Semaphore(limit)
        failures: list[BaseException] = []
        answered_here: list[int] = []
        url = self.settings.root_url + path
        async with httpx.AsyncClient(timeout=self._timeout(), headers=self._headers(), limits=limits) as http:

            async def one(i: int) -> None:
                async with gate:
                    if failures:  # a request failed for good: start no new ones
                        return
                    try:
                        answer = await self._with_retries(lambda: http.post(url, json=bodies[i]), path)
                        on_answer(i, answer)
                    except Exception as exc:
                        failures.append(exc)
                        return
                    self.answered += 1
                    answered_here.append(i)

            await asyncio.gather(*(one(i) for i in range(len(bodies))))
        if failures:
            done = len(answered_here)
            fix = ("Fix what the message names" if isinstance(failures[0], RefusedError)
                   else "Fix the server (or raise model.max_retries or model.timeout)")
            raise ServerError(
                f"{failures[0]} {done} of this batch's {len(bodies)} requests ({self.answered} in this run) were "
                f"answered and are saved in the cache. {fix} and run again: it resumes where this run stopped."
            )

    async def _with_retries(self, send: Callable[[], Any], path: str) -> Any:
        s = self.settings
        backoff = tenacity.wait_exponential_jitter(multiplier=s.retry_wait, max=MAX_BACKOFF, jitter=s.retry_wait)

        def wait(state: tenacity.RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            after = getattr(exc, "retry_after", None)
            return after if after is not None else backoff(state)

        def before_sleep(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.warning("%s%s: %s; retry %d of %d in %.1f s", s.root_url, path, exc, state.attempt_number,
                        s.max_retries, state.next_action.sleep if state.next_action else 0.0)

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
                    return await self._attempt(send, path)
        except _Retryable as exc:
            raise ServerError(
                f"the request to {s.root_url}{path} failed {s.max_retries + 1} time(s), the last with: {exc}."
            ) from None
        raise AssertionError("unreachable: tenacity either returns or raises")  # pragma: no cover

    async def _attempt(self, send: Callable[[], Any], path: str) -> Any:
        try:
            response = await send()
        except httpx.TimeoutException:
            raise _Retryable(f"no answer within model.timeout={self.settings.timeout:g} s") from None
        except httpx.TransportError as exc:
            raise _Retryable(f"connection failed ({type(exc).__name__}: {exc or 'no detail'})") from None
        if response.status_code in (401, 403):
            env = self.settings.api_key_env
            state = "is set" if self.settings.api_key() else "is not set"
            raise RefusedError(
                f"the server at {self.settings.root_url}{path} refused the API key with {_server_message(response)}. "
                f"The key is read from ${env}, which {state}: put a valid key with access to model.model "
                f"'{self.settings.model}' in it, or point model.api_key_env at the variable that holds one."
            )
        if response.status_code == 429 or response.status_code >= 500:
            if is_validation_error(response.text):  # the same request fails the same way: no retry
                raise RefusedError(self._validation_message(response, path))
            raise _Retryable(_server_message(response), _retry_after(response.headers.get("Retry-After")))
        if response.status_code >= 400:
            raise RefusedError(
                f"the server at {self.settings.root_url}{path} refused the request with {_server_message(response)}. "
                "Check model.model, model.base_url and the API key variable (model.api_key_env)."
            )
        try:
            return response.json()
        except ValueError:
            raise _Retryable(f"the answer is not JSON: {response.text[:200]!r}") from None

    def _validation_message(self, response: httpx.Response, path: str) -> str:
        text = f"the server at {self.settings.root_url}{path} rejected the request body with {_server_message(response)}"
        if "prompt" in response.text and self.settings.tokenized_requests:
            return (f"{text}. It does not take token ids as the prompt (llama.cpp's server is one such): set "
                    "model.tokenized_requests=false to send text.")
        return f"{text}. The request is malformed for this server, so it is not retried; check the model settings."

    def post_one(self, path: str, body: Mapping[str, Any]) -> Any:
        """One POST with retries (the alignment probe); its answer."""
        got: list[Any] = []
        self.post_all(path, [body], lambda _, answer: got.append(answer))
        return got[0]
