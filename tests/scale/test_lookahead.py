"""A served model's next chunk is pulled (leased, tokenized) while the one before it is still being
answered (``dispatch.LOOKAHEAD``), not when its last requests are: events, never timings."""

from __future__ import annotations

import threading

from evalflow.core.records import Request
from evalflow.scale import dispatch
from evalflow.scale.dispatch import answered_each


class Served:
    """Answers each chunk only once the next chunk has started (or says it never did)."""

    ANSWERS_EACH = True

    def __init__(self) -> None:
        self.started: list[threading.Event] = [threading.Event() for _ in range(4)]
        self.calls = 0
        self.lock = threading.Lock()

    def in_flight(self) -> int:
        return 1  # a backlog of 2 requests: far less than a chunk

    def answer_each(self, rtype, requests, on_answer) -> None:
        with self.lock:
            n = self.calls
            self.calls += 1
        self.started[n].set()
        if n + 1 < 3 and not self.started[n + 1].wait(timeout=30):
            raise AssertionError(f"chunk {n + 1} was not started while chunk {n} was being answered")
        for i, r in enumerate(requests):
            on_answer(i, r.args[1])


def test_the_next_chunk_starts_while_one_is_answered() -> None:
    chunks = [[(f"k{c}-{i}", Request("generate_until", (f"c{c}", f"a{c}-{i}"))) for i in range(10)] for c in range(3)]
    done = list(answered_each(Served(), "generate_until", iter(chunks), "local"))
    assert sorted(k for d in done for k in d.keys) == sorted(k for c in chunks for k, _ in c)
    assert dispatch.LOOKAHEAD >= 2
