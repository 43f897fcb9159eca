"""How HFModel orders and batches requests, as pure functions (no torch).

Ordering follows lm-eval 0.4.13's ``Collator`` so batches hold the same requests as lm-eval's:

- loglikelihood: requests whose model input is identical (same ``context + continuation[:-1]``
  tokens) form one group answered by one forward pass (lm-eval's ``group_by="contexts"`` logits
  cache, which makes multiple choice with one-token answers cost one pass per question). Groups are
  sorted by descending total length, ties by the tokens themselves.
- generate_until: requests are grouped by their generation kwargs (first-seen order), and sorted
  within a group by descending context length, ties by the context text.

Sorting longest-first means the first item of a batch sets its padded length, which is what the
``auto`` batch size heuristic uses.

>>> groups = plan_loglikelihood([([1, 2], [3]), ([1, 2], [4]), ([1], [2, 3, 4])])
>>> [[m.index for m in g.members] for g in groups]
[[2], [0, 1]]
>>> [len(b) for b in chunk([5, 4, 3, 2, 1], lambda first: 2)]
[2, 2, 1]
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class ScoreItem:
    """One loglikelihood request as tokens; ``index`` is its position in the caller's list."""

    index: int
    ctx: tuple[int, ...]
    cont: tuple[int, ...]


@dataclass(frozen=True)
class ScoreGroup:
    """Requests sharing one model input; ``rep`` (longest continuation) is the one fed to the model.

    Every member's continuation is a suffix-aligned slice of the representative's scored positions,
    because members differ only in where context ends and in their last token.
    """

    rep: ScoreItem
    members: tuple[ScoreItem, ...]


def plan_loglikelihood(
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]], group_contexts: bool = True
) -> list[ScoreGroup]:
    """Group requests by identical model input and sort groups longest first (lm-eval's Collator);
    ``group_contexts=False`` (lm-eval's ``logits_cache=False``): each request its own group."""
    by_input: dict[Any, list[ScoreItem]] = {}
    for i, (ctx, cont) in enumerate(pairs):
        item = ScoreItem(i, tuple(ctx), tuple(cont))
        by_input.setdefault(item.ctx + item.cont[:-1] if group_contexts else i, []).append(item)
    groups = [ScoreGroup(max(items, key=lambda m: len(m.cont)), tuple(items)) for items in by_input.values()]
    return sorted(groups, key=lambda g: (-(len(g.rep.ctx) + len(g.rep.cont)), g.rep.ctx + g.rep.cont))


def chunk(items: Sequence[T], size_for: Callable[[T], int]) -> list[list[T]]:
    """Consecutive batches; each batch's size is ``size_for(its first item)`` (at least 1)."""
    out: list[list[T]] = []
    pos = 0
    while pos < len(items):
        size = max(1, int(size_for(items[pos])))
        out.append(list(items[pos : pos + size]))
        pos += size
    return out


def gen_kwargs_key(gen_kwargs: Mapping[str, Any]) -> str:
    """A canonical text of one request's generation kwargs: requests batch only with equal ones."""
    return json.dumps(gen_kwargs, sort_keys=True, default=repr)


def plan_generation(
    contexts: Sequence[str], gen_kwargs: Sequence[Mapping[str, Any]], n_tokens: Callable[[str], int]
) -> list[list[int]]:
    """Indices of the requests grouped by generation kwargs, each group sorted longest context first."""
    groups: dict[str, list[int]] = {}
    for i, kw in enumerate(gen_kwargs):
        groups.setdefault(gen_kwargs_key(kw), []).append(i)
    lengths = {i: n_tokens(contexts[i]) for i in range(len(contexts))}
    return [sorted(idx, key=lambda i: (-lengths[i], contexts[i])) for idx in groups.values()]


@dataclass(frozen=True)
class ModelDims:
    """The sizes that bound the memory one sequence needs in a forward pass."""

    vocab: int
    hidden: int
    intermediate: int
    layers: int
    heads: int
    dtype_bytes: int


def bytes_per_sequence(dims: ModelDims, seq_len: int) -> int:
    """A deliberately generous estimate of one sequence's peak forward memory, in bytes.

    Logits and their log-softmax (two fp32 ``seq x vocab`` arrays), the MLP's intermediate
    activations, a handful of hidden-size buffers, the attention score matrix of one layer, and the
    KV cache of all layers (generation keeps it).
    """
    logits = 2 * 4 * seq_len * dims.vocab
    mlp = 3 * dims.dtype_bytes * seq_len * dims.intermediate
    hidden = 8 * dims.dtype_bytes * seq_len * dims.hidden
    attention = 4 * dims.heads * seq_len * seq_len
    kv_cache = 2 * dims.dtype_bytes * dims.layers * seq_len * dims.hidden
    return logits + mlp + hidden + attention + kv_cache


CPU_PASS_ROWS = 8
"""``batch_size=auto`` on a CPU: at most this many rows (of packed tokens) per scoring pass. A pass
is compute-bound there, so more rows buy nothing and cost cache misses: SmolLM2, 600 arc_easy
requests, 1 thread, CPU seconds by batch size 1 / 4 / 8 / 16 / 32: 24.2 / 21.9 / 22.2 / 24.5 /
25.8; 600 mmlu 5-shot requests, 1 / 4 / 8 / 16: 33.4 / 32.7 / 34.3 / 40.5 (differences under ~5%
are noise on the shared machine they were measured on). Generation sizes its rows separately
(:func:`auto_decode_slots`)."""


def auto_batch_size(dims: ModelDims, seq_len: int, free_bytes: int, max_batch_size: int) -> int:
    """``batch_size=auto``: as many sequences of ``seq_len`` as fit in a quarter of free memory.

    lm-eval probes by running batches until CUDA reports out-of-memory; on a CPU an OOM kills the
    process instead of raising, so evalflow estimates from the model's sizes. The quarter leaves
    room for the estimate's misses and for the rest of the process. Clamped to [1, max_batch_size].
    """
    per_seq = max(1, bytes_per_sequence(dims, max(1, seq_len)))
    return max(1, min(int(max_batch_size), (free_bytes // 4) // per_seq))


def bytes_per_decode_row(dims: ModelDims, seq_len: int) -> int:
    """One row of a continuous-batching decode step: its key/value buffer for ``seq_len`` positions
    (the bulk), one logits row, and a few hidden-size buffers. Its context runs alone when it
    joins, so the full-sequence activations of :func:`bytes_per_sequence` are paid once, not per row."""
    kv_cache = 2 * dims.dtype_bytes * dims.layers * seq_len * dims.hidden
    return kv_cache + 2 * 4 * dims.vocab + 8 * dims.dtype_bytes * dims.hidden + 4 * dims.heads * seq_len


def auto_decode_slots(dims: ModelDims, seq_len: int, free_bytes: int, max_batch_size: int) -> int:
    """``batch_size=auto`` for greedy continuous batching: as many rows as fit in a quarter of free
    memory, up to ``max_batch_size``. On a CPU a decode step reads every weight whatever the batch,
    so tokens/s grow with the rows (SmolLM2, 900-token contexts, 1 thread: 12 tokens/s at 1 row,
    45 at 8, 68 at 16, 88 at 32, 94 at 64; ``benchmarks/hf_speed.py --only decode``): the largest
    batch that fits is never slower than a smaller fixed one."""
    per_row = max(1, bytes_per_decode_row(dims, max(1, seq_len)) + bytes_per_sequence(dims, 1))
    return max(1, min(int(max_batch_size), (free_bytes // 4) // per_row))
