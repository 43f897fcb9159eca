"""The viewer's app driven in-process through aiohttp's test client (no port, no sleeps), and a
front end of three small files standing in for view/static/ where a test needs known contents."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from yarl import URL


@dataclass(frozen=True)
class Answer:
    path: str
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        import json

        return json.loads(self.body)


def ask(
    make: Callable[[], web.Application], paths: Sequence[str], headers: dict[str, str] | None = None
) -> list[Answer]:
    """GET each path (sent as written: no normalisation of ``..`` or ``%2e``), in order, from a
    fresh app (an aiohttp app is bound to the event loop that first serves it)."""
    app = make()

    async def go() -> list[Answer]:
        async with TestClient(TestServer(app)) as client:
            out = []
            for path in paths:
                url = URL(str(client.make_url("/")).rstrip("/") + path, encoded=True)
                async with client.session.get(url, headers=headers) as resp:
                    out.append(Answer(path, resp.status, dict(resp.headers), await resp.read()))
            return out

    return asyncio.run(go())


FRONT_END = {
    "index.html": '<!doctype html><html><head><meta name="evalflow-mode" content="server">'
    '<link rel="stylesheet" href="static/app.css"><script src="static/app.js" defer></script></head>'
    "<body></body></html>\n",
    "app.js": "window.EVALFLOW_BUNDLE = window.EVALFLOW_BUNDLE || {put() {}};\n",
    "app.css": "body { margin: 0; }\n",
}


def write_front_end(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in FRONT_END.items():
        (folder / name).write_text(text)
    (folder / "secret.py").write_text("not served\n")
    return folder
