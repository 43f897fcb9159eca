"""``Slots``: a freed slot goes to the oldest waiting request, never to a newcomer (asyncio.Queue
lets a newcomer take it, so a chunk's last requests could wait behind the next chunk's)."""

from __future__ import annotations

import asyncio

from evalflow.models.api.slots import Slots


def test_first_come_first_served_with_no_barging() -> None:
    """One slot: a0 frees it and at once asks again (as the next request does when an answer
    arrives); a1, which asked before, gets it, then a2, then a0's second request."""

    async def main() -> list[str]:
        slots, order, release = Slots(), [], asyncio.Event()
        slots.put(0)

        async def request(name: str, again: bool = False) -> None:
            server = await slots.get()
            order.append(name)
            if again:
                await release.wait()  # a0 holds the slot until a1 and a2 wait for it
            slots.put(server)
            if again:  # in the same step as the put: an asyncio.Queue would hand it to this get
                await request(name + "'")

        tasks = [asyncio.create_task(request("a0", again=True))]
        await asyncio.sleep(0)
        tasks += [asyncio.create_task(request(n)) for n in ("a1", "a2")]
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(main()) == ["a0", "a1", "a2", "a0'"]


def test_a_cancelled_waiter_passes_its_slot_on() -> None:
    async def main() -> int:
        slots = Slots()
        waiting = asyncio.create_task(slots.get())
        other = asyncio.create_task(slots.get())
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.sleep(0)
        slots.put(7)
        return await asyncio.wait_for(other, 5)

    assert asyncio.run(main()) == 7
