"""aiohttp plumbing of :mod:`evalflow.models.api.client`: an HTTP answer read whole, and closing
a client's sessions when it goes (aiohttp reports a session garbage-collected open as an error)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True)
class Reply:
    """One HTTP answer, read whole (so the connection is free again before it is parsed)."""

    status_code: int
    reason_phrase: str
    headers: Mapping[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """orjson: an echoed prompt's log-probabilities make answers of several kB, and parsing them
        is the largest share of the client's CPU time per request (half of it with orjson)."""
        return orjson.loads(self.body)


async def read_reply(response: Any) -> Reply:
    return Reply(response.status, response.reason or "", response.headers, await response.read())


def shut_down(loop: asyncio.AbstractEventLoop, thread: threading.Thread, sessions: dict[int, Any]) -> None:
    """Close a client's sessions on its loop, then stop the loop (aiohttp reports a session
    garbage-collected open as an error)."""

    async def close() -> None:
        for session in list(sessions.values()):
            await session.close()

    if not loop.is_running():
        return
    future = asyncio.run_coroutine_threadsafe(close(), loop)
    if threading.current_thread() is not thread:  # collected on the loop's own thread: cannot wait
        try:
            future.result(timeout=5)
        except Exception:
            pass
    loop.call_soon_threadsafe(loop.stop)
