"""The floor of a served client's cost: a run's recorded request bodies (``GET /recorded`` of a
``tests/support/latency_server.py --record``) sent again by nothing but an aiohttp session with
``num_concurrent`` requests in flight, each answer parsed with orjson and dropped.

    python benchmarks/bare_client.py URL BODIES.json NUM_CONCURRENT

No tokenizing, no cache, no other thread: on a given machine under a given load, what this gets
from a server is about the most any client in Python gets, so ``benchmarks/suite_throughput.py``
prints evalflow's requests/s against it (same bodies, same server, the same round).
"""

from __future__ import annotations

import asyncio
import sys

import aiohttp
import orjson


async def replay(url: str, bodies: list[bytes], concurrent: int) -> None:
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrent)) as session:

        async def slot() -> None:
            while not queue.empty():
                body = queue.get_nowait()
                async with session.post(url, data=body, headers=headers) as response:
                    orjson.loads(await response.read())

        await asyncio.gather(*(slot() for _ in range(concurrent)))


def main() -> int:
    url, path, concurrent = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(path, "rb") as f:
        bodies = [orjson.dumps(b) for b in orjson.loads(f.read())]
    asyncio.run(replay(url.rstrip("/") + "/completions", bodies, concurrent))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
