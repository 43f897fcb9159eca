"""Packing model inputs into rows without padding: each request's tokens exactly once (pure).

A packed row holds several *segments* side by side. A segment attends to itself causally, to its
parent segment (an earlier one in the same row) in full, and, if the row continues a cached
prefix, to that prefix's key/values; its positions continue from what it attends to. So a
multiple-choice question becomes one tree, ``[context | choice 1 | choice 2 | ...]``, where lm-eval
would run the context once per choice, and a batch holds many such trees with no padding between
them. ``kv.packed_logprobs`` turns rows into one forward pass (a 4D mask, explicit positions).

>>> trees = [tree((1, 2, 3), [((4, 5), 7, 2), ((6,), 8, 1)]), tree((9, 9), [], row=5, scored=1)]
>>> rows = pack(trees, width=7)
>>> [sum(len(s.tokens) for s in r.segments) for r in rows]
[6, 2]
>>> rows[0].segments[1].parent, rows[0].segments[1].scored
(0, ((7, 2),))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Segment:
    """Tokens run together; ``scored`` lists (caller's row, how many of its final positions it scores)."""

    tokens: tuple[int, ...]
    parent: int = -1  # index of the parent segment in the same packed row, -1: none
    scored: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class PackedRow:
    """Segments laid out left to right; ``prefix`` is the cached prefix the row continues (-1: none)."""

    segments: tuple[Segment, ...]
    prefix: int = -1

    @property
    def width(self) -> int:
        return sum(len(s.tokens) for s in self.segments)


def tree(
    root: Sequence[int], branches: Sequence[tuple[Sequence[int], int, int]], row: int = -1, scored: int = 0
) -> tuple[Segment, ...]:
    """A root and its branches (tokens, caller's row, scored positions): the root's index is 0.

    A root with no branches scores its own last ``scored`` positions for caller row ``row``.
    """
    head = Segment(tuple(root), -1, ((row, scored),) if not branches else ())
    return (head,) + tuple(Segment(tuple(t), 0, ((r, c),)) for t, r, c in branches)


def pack(trees: Sequence[tuple[Segment, ...]], width: int, prefix: int = -1) -> list[PackedRow]:
    """First-fit decreasing: biggest trees first, each into the first row with room for it.

    A tree is never split (its branches must see its root in the same row); one wider than
    ``width`` gets a row of its own. Rows come out widest first, for even batches.
    """
    sizes = [sum(len(s.tokens) for s in t) for t in trees]
    rows: list[list[tuple[Segment, ...]]] = []
    room: list[int] = []
    for i in sorted(range(len(trees)), key=lambda i: -sizes[i]):
        target = next((k for k, r in enumerate(room) if r >= sizes[i]), None)
        if target is None:
            rows.append([])
            room.append(width)
            target = len(rows) - 1
        rows[target].append(trees[i])
        room[target] -= sizes[i]
    out = [PackedRow(_concat(r), prefix) for r in rows]
    return sorted(out, key=lambda r: -r.width)


def _concat(trees: Sequence[tuple[Segment, ...]]) -> tuple[Segment, ...]:
    """Trees one after another, with parent indices shifted to the row's numbering."""
    out: list[Segment] = []
    for t in trees:
        base = len(out)
        out.extend(Segment(s.tokens, s.parent + base if s.parent >= 0 else -1, s.scored) for s in t)
    return tuple(out)
