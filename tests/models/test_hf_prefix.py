"""Prefix-sharing plans (which rows share which prefix) and row packing, tested without a model."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from evalflow.models.hf.fast.pack import pack, tree
from evalflow.models.hf.fast.prefix import PrefixMemo, common_prefix_len, plan_families

token_rows = st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=7), min_size=0, max_size=12)


def saved(families) -> int:
    return sum((len(f.rows) - 1) * f.prefix_len for f in families)


@given(token_rows, st.integers(1, 3))
def test_every_row_is_planned_once_and_families_really_share_their_prefix(rows, min_prefix):
    caps = [max(0, len(r) - 1) for r in rows]
    families, alone = plan_families(rows, caps, min_prefix)
    planned = sorted([i for f in families for i in f.rows] + alone)
    assert planned == list(range(len(rows)))
    for f in families:
        assert len(f.rows) >= 2 and f.prefix_len >= min_prefix
        head = rows[f.rows[0]][: f.prefix_len]
        assert all(rows[i][: f.prefix_len] == head and f.prefix_len <= caps[i] for i in f.rows)


def best_partition_savings(rows, caps, min_prefix) -> int:
    """Brute force over every cut of the token-sorted rows into runs of neighbours.

    The planner only groups neighbours in token order. Any grouping can beat that only when a
    cap stops a row from sharing what its neighbours share (rows [0,0] and [0,1] around two
    [0,0,1,0]), a saving of a token or two per such row, so the optimum checked is this one.
    """
    order = sorted(range(len(rows)), key=lambda i: tuple(rows[i]))
    n = len(order)
    best = 0
    for cuts in itertools.product((False, True), repeat=max(0, n - 1)):
        total, start = 0, 0
        for end in [k + 1 for k in range(n - 1) if cuts[k]] + [n]:
            members = order[start:end]
            if len(members) >= 2:
                share = min(
                    min(common_prefix_len(rows[members[0]], rows[i]) for i in members), min(caps[i] for i in members)
                )
                total += (len(members) - 1) * share if share >= min_prefix else 0
            start = end
        best = max(best, total)
    return best


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 1), min_size=1, max_size=5), min_size=1, max_size=5))
def test_the_plan_saves_as_many_tokens_as_the_best_cut_into_neighbours(rows):
    caps = [len(r) - 1 for r in rows]
    families, _ = plan_families(rows, caps, 1)
    assert saved(families) == best_partition_savings(rows, caps, 1)


def test_nested_sharing_prefers_the_bigger_saving():
    fewshot = list(range(100, 140))  # a 40-token prefix shared by 6 documents
    rows = [fewshot + [d, d, d, c] for d in range(6) for c in (0, 1)]  # each document: two choices
    families, alone = plan_families(rows, [len(r) - 1 for r in rows], 8)
    # one family behind the few-shot prefix saves 11 x 40 tokens; per-document families 6 x 43
    assert not alone and [(f.prefix_len, sorted(f.rows)) for f in families] == [(40, list(range(12)))]


def test_caps_keep_scored_positions_out_of_the_prefix_and_zero_opts_out():
    rows = [[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 3, 6]]
    families, alone = plan_families(rows, [2, 3, 0], 1)
    assert [(f.prefix_len, f.rows) for f in families] == [(2, (0, 1))] and alone == [2]


def test_memo_finds_the_entry_sharing_most_tokens_and_evicts_by_count_and_size():
    memo = PrefixMemo(capacity=2, max_bytes=10, size_of=len)
    memo.put([1, 2, 3, 4], "abcd")
    memo.put([1, 2, 9], "xyz")
    assert memo.find([1, 2, 3, 7], min_len=2) == ("abcd", 3)
    assert memo.find([5, 6], min_len=1) is None
    memo.put([7, 7], "qq")  # over capacity: the least recently used ([1, 2, 9]) goes
    assert memo.find([1, 2, 9], min_len=3) is None and memo.find([1, 2, 3], min_len=3) == ("abcd", 3)
    memo.put([8], "x" * 11)  # larger than the whole budget: not kept
    assert len(memo) == 2 and memo.find([8], min_len=1) is None
    memo.put([6], "123456")  # over capacity again: the least recently used ([7, 7]) goes
    assert memo.find([7, 7], min_len=2) is None
    assert memo.find([6], min_len=1) == ("123456", 1) and memo.find([1, 2, 3, 4], min_len=4) == ("abcd", 4)
    big = PrefixMemo(capacity=5, max_bytes=10, size_of=len)
    for key, value in ([1], "aaaa"), ([2], "bbbb"), ([3], "cccc"):  # 12 bytes > 10: the oldest goes
        big.put(key, value)
    assert len(big) == 2 and big.find([1], min_len=1) is None


@given(st.lists(st.tuples(st.integers(1, 9), st.integers(0, 4)), min_size=1, max_size=12), st.integers(4, 20))
def test_packing_places_every_segment_once_and_keeps_trees_whole(shapes, width):
    trees = []
    for t, (root_len, n_branches) in enumerate(shapes):
        branches = [([t] * (b + 1), 10 * t + b, 1) for b in range(n_branches)]
        trees.append(tree([t] * root_len, branches, row=10 * t + 9, scored=1))
    rows = pack(trees, width)
    scored = sorted(c for r in rows for s in r.segments for c, _ in s.scored)
    assert scored == sorted(c for t in trees for s in t for c, _ in s.scored)
    for r in rows:
        roots = [s for s in r.segments if s.parent == -1]
        assert r.width <= width or len(roots) == 1  # only a tree wider than a row gets one alone
        for i, s in enumerate(r.segments):
            if s.parent >= 0:  # a branch follows its own root, in the same row
                assert s.parent < i and r.segments[s.parent].parent == -1
                assert r.segments[s.parent].tokens[0] == s.tokens[0]
    assert [r.width for r in rows] == sorted((r.width for r in rows), reverse=True)
