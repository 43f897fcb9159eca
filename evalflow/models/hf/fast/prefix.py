"""Which requests share a token prefix, so its key/values are computed once (pure, no torch).

A causal model's key/values at a position depend only on the tokens up to it, so requests whose
model inputs start with the same tokens can share that prefix's key/values: multiple-choice
continuations of one context, and every document of an mmlu subject (``first_n`` few-shot gives
them the same five examples). Sharing is planned on the *token* lists lm-eval's tokenization
produced, never on strings, so it only ever reuses positions that are bit-for-bit the same input.

:func:`plan_families` partitions rows (model inputs) into families that share a prefix, choosing
the partition that saves the most tokens; :class:`PrefixMemo` keeps a few computed prefixes so the
next chunk of requests (the inference edge sends chunks) finds them again.

>>> rows = [[1, 2, 3, 4, 5], [1, 2, 3, 4, 6], [1, 2, 3, 9, 9], [7, 8]]
>>> families, alone = plan_families(rows, caps=[4, 4, 4, 1], min_prefix=2)
>>> [(f.prefix_len, f.rows) for f in families], alone
([(3, (0, 1, 2))], [3])
>>> common_prefix_len([1, 2, 3], [1, 2, 4])
2
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

V = TypeVar("V")

MAX_FAMILY_ROWS = 256  # bounds the planner's quadratic scan; a bigger family saves ~nothing more


@dataclass(frozen=True)
class Family:
    """Rows (indices into the caller's list) whose inputs share their first ``prefix_len`` tokens."""

    prefix_len: int
    rows: tuple[int, ...]


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def plan_families(
    rows: Sequence[Sequence[int]], caps: Sequence[int], min_prefix: int
) -> tuple[list[Family], list[int]]:
    """Families of rows sharing at least ``min_prefix`` tokens, and the rows computed alone.

    ``caps[i]`` is the longest prefix row ``i`` may take from a family: its scored positions (and
    at least one token) must stay in its own suffix; 0 keeps a row out of every family. Rows are
    sorted by their tokens, so rows sharing a prefix are neighbours; a dynamic program then cuts
    the sorted list into consecutive families maximising the tokens saved, sum of
    ``(rows - 1) * prefix_len``. Nested sharing (an mmlu subject prefix, then one question's
    choices) is resolved towards whichever saves more.
    """
    order = sorted(range(len(rows)), key=lambda i: tuple(rows[i]))
    n = len(order)
    lcp = [0] + [common_prefix_len(rows[order[k - 1]], rows[order[k]]) for k in range(1, n)]
    best = [0] * (n + 1)  # best[j]: tokens saved by the best partition of the first j sorted rows
    cut: list[tuple[int, int]] = [(0, 0)] * (n + 1)  # (start of the last family, its prefix length)
    for j in range(1, n + 1):
        best[j], cut[j] = best[j - 1], (j - 1, 0)
        shared = caps[order[j - 1]]
        for i in range(j - 2, max(-1, j - 1 - MAX_FAMILY_ROWS), -1):
            shared = min(shared, lcp[i + 1], caps[order[i]])
            if shared < min_prefix:
                break
            saved = best[i] + (j - i - 1) * shared
            if saved > best[j]:
                best[j], cut[j] = saved, (i, shared)
    families: list[Family] = []
    alone: list[int] = []
    j = n
    while j > 0:
        start, prefix_len = cut[j]
        if prefix_len:
            families.append(Family(prefix_len, tuple(order[start:j])))
        else:
            alone.extend(order[start:j])
        j = start
    return families[::-1], sorted(alone)


class PrefixMemo(Generic[V]):
    """The states of a few recently computed prefixes, found again by longest common token prefix.

    A prefix's key/values are valid for any shorter prefix of it (causality), so an entry serves
    every later request whose prefix agrees with it on enough tokens, even if the two prefixes
    differ near their ends. Bounded by entry count and by total size (``size_of``), least
    recently used first out.
    """

    def __init__(self, capacity: int, max_bytes: int, size_of: Callable[[V], int]) -> None:
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.size_of = size_of
        self._entries: OrderedDict[tuple[int, ...], V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def find(self, tokens: Sequence[int], min_len: int) -> tuple[V, int] | None:
        """The entry sharing the most leading tokens with ``tokens`` (at least ``min_len``), and how many."""
        best: tuple[tuple[int, ...], int] | None = None
        for key in self._entries:
            n = common_prefix_len(key, tokens)
            if n >= min_len and (best is None or n > best[1]):
                best = (key, n)
        if best is None:
            return None
        self._entries.move_to_end(best[0])
        return self._entries[best[0]], best[1]

    def covering(self, tokens: Sequence[int], min_prefix: int) -> tuple[V, int] | None:
        """An entry sharing all but a few trailing tokens of ``tokens`` (the rows then run those
        few themselves), and how many it shares; at least ``min_prefix``."""
        slack = max(16, len(tokens) // 8)
        return self.find(tokens, max(min_prefix, len(tokens) - slack))

    def put(self, tokens: Sequence[int], value: V) -> None:
        if self.size_of(value) > self.max_bytes or self.capacity < 1:
            return
        self._entries[tuple(tokens)] = value
        self._entries.move_to_end(tuple(tokens))
        while len(self._entries) > self.capacity or sum(map(self.size_of, self._entries.values())) > self.max_bytes:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()
