"""Request ordering and batch planning of HFModel (lm-eval's Collator), tested without a model."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from evalflow.models.hf.batching import (
    ModelDims,
    auto_batch_size,
    auto_decode_slots,
    bytes_per_sequence,
    chunk,
    plan_generation,
    plan_loglikelihood,
)


def test_groups_share_one_model_input_and_the_longest_continuation_represents_them():
    pairs = [
        ([1, 2, 3], [4]),  # input 1 2 3
        ([1, 2, 3], [5]),  # same input as above: one group
        ([1, 2], [3, 6]),  # context ends earlier, input still 1 2 3: same group, longer cont
        ([9], [8, 7, 6, 5]),  # longest overall
        ([1], [2]),
    ]
    groups = plan_loglikelihood(pairs)
    assert [sorted(m.index for m in g.members) for g in groups] == [[3], [0, 1, 2], [4]]
    assert groups[1].rep.index == 2  # the member with the longest continuation


def test_ties_in_length_are_ordered_by_tokens():
    groups = plan_loglikelihood([([5], [5]), ([1], [9]), ([3], [3])])
    assert [g.rep.index for g in groups] == [1, 2, 0]


@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(0, 3), min_size=1, max_size=4), st.lists(st.integers(0, 3), min_size=1, max_size=3)
        ),
        max_size=30,
    )
)
def test_every_request_is_in_exactly_one_group_sorted_longest_first(pairs):
    groups = plan_loglikelihood(pairs)
    indices = sorted(m.index for g in groups for m in g.members)
    assert indices == list(range(len(pairs)))
    lengths = [len(g.rep.ctx) + len(g.rep.cont) for g in groups]
    assert lengths == sorted(lengths, reverse=True)
    for g in groups:
        assert all(m.ctx + m.cont[:-1] == g.rep.ctx + g.rep.cont[:-1] for m in g.members)
        assert all(len(m.cont) <= len(g.rep.cont) for m in g.members)


def test_chunk_sizes_come_from_each_batch_first_item():
    assert chunk([], lambda x: 3) == []
    assert chunk([10, 9, 3, 2, 1], lambda first: 1 if first > 5 else 2) == [[10], [9], [3, 2], [1]]
    assert chunk([1, 2], lambda first: 0) == [[1], [2]]  # never an empty batch


def test_generation_groups_by_kwargs_in_first_seen_order_longest_context_first():
    contexts = ["aa", "b", "cccc", "dd", "e"]
    kwargs = [{"until": ["\n"]}, {"until": ["."]}, {"until": ["\n"]}, {"until": ["."]}, {"until": ["\n"]}]
    assert plan_generation(contexts, kwargs, len) == [[2, 0, 4], [3, 1]]


def test_auto_batch_size_shrinks_with_length_and_respects_bounds():
    dims = ModelDims(vocab=49152, hidden=576, intermediate=1536, layers=30, heads=9, dtype_bytes=4)
    free = 16 * 2**30
    short, long = auto_batch_size(dims, 64, free, 64), auto_batch_size(dims, 2048, free, 64)
    assert short == 64 and 1 <= long < short
    assert auto_batch_size(dims, 8192, 2**20, 64) == 1
    assert bytes_per_sequence(dims, 2048) > bytes_per_sequence(dims, 1024) * 2 - 1


def test_auto_decode_slots_count_the_key_values_not_a_full_forward():
    dims = ModelDims(vocab=49152, hidden=576, intermediate=1536, layers=30, heads=9, dtype_bytes=4)
    free = 20 * 2**30
    assert auto_decode_slots(dims, 1256, free, 64) > auto_batch_size(dims, 1256, free, 64)  # gsm8k: ~10 vs 64
    assert auto_decode_slots(dims, 1256, free, 16) == 16
    assert auto_decode_slots(dims, 8192, 2**20, 64) == 1
    assert auto_decode_slots(dims, 4096, free, 64) < auto_decode_slots(dims, 1024, free, 64)
