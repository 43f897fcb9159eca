"""Log-likelihood scoring of token pairs: each distinct token prefix computed once, no padding.

:func:`score_pairs` is the one place loglikelihood token pairs meet the model.

1. Pairs with the same model input share one row (lm-eval's logits cache,
   ``batching.plan_loglikelihood``).
2. Rows that share a token prefix form families (``prefix.plan_families``): a question and its
   choices, or every document of an mmlu subject behind the same five examples.
3. A family small enough for one packed row becomes a tree ``[prefix | branch | branch ...]``;
   trees and lone rows are packed side by side into rows without padding (``pack``).
4. A bigger family (a long few-shot prefix with many documents behind it) runs its prefix once,
   keeps the key/values in a memo that the next chunk of requests finds again, and packs its
   branches into rows that continue that cached prefix.

Rows cut by left truncation, long rows that share nothing (a rolling window: packing them would only
cost a dense mask), and every row when sharing is off, run as lm-eval runs them: whole, longest
first, right-padded, causal attention without a mask (``torch_ops.continuation_logprobs``). A pass
holds at most as many scored positions as a batch of lm-eval's would compute logits for
(``batch_size`` x the longest input), so the logits, the largest arrays of a pass, stay within
lm-eval's memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from evalflow.models.hf import torch_ops
from evalflow.models.hf.batching import chunk, plan_loglikelihood
from evalflow.models.hf.fast.pack import PackedRow, Segment, pack, tree
from evalflow.models.hf.fast.prefix import Family, PrefixMemo, plan_families
from evalflow.models.lmeval_tokens import model_input

if TYPE_CHECKING:  # imported where a shared pass runs: the reference path needs no transformers cache layers
    from evalflow.models.hf.fast import kv

Pair = tuple[Sequence[int], Sequence[int]]
MIN_ROW_WIDTH = 256  # packed rows are at least this wide, so a few short questions share one
Passes = Iterator[bool]  # one item after each forward pass, once its rows are delivered


@dataclass
class ScoringSetup:
    """What scoring needs from a loaded HFModel."""

    model: Any
    device: Any
    max_length: int
    batch_size_for: Callable[[int], int]  # sequence length -> rows per pass
    keep_only_needed: bool  # the model takes an int logits_to_keep
    share_prefixes: bool  # packing and key/value reuse are on and passed the model's self-check
    exact_keep: bool = False  # the model takes a boolean [batch, length] logits_to_keep
    min_prefix: int = 8  # shorter shared prefixes save less than splitting them off costs
    memo: PrefixMemo[kv.PrefixStates] = field(
        default_factory=lambda: PrefixMemo(capacity=8, max_bytes=256 * 2**20, size_of=lambda s: s.nbytes)
    )


@dataclass(frozen=True)
class Row:
    """One model input: its tokens, how many final positions are scored, the group it answers."""

    tokens: tuple[int, ...]
    scored: int
    group: int
    truncated: bool


def score_pairs(setup: ScoringSetup, pairs: Sequence[Pair]) -> list[tuple[float, bool]]:
    """(logprob, is_greedy) of each (context tokens, continuation tokens) pair, in input order."""
    results: dict[int, tuple[float, bool]] = {}
    for part in score_parts(setup, pairs):
        results.update(part)
    return [results[i] for i in range(len(pairs))]


def score_parts(setup: ScoringSetup, pairs: Sequence[Pair]) -> Iterator[dict[int, tuple[float, bool]]]:
    """The same answers as :func:`score_pairs`, ``{pair index: (logprob, is_greedy)}`` after each
    forward pass, holding the pairs that pass finished: the edge saves them while the next pass
    runs, so a killed run loses one pass, not the chunk (``evalflow.scale.dispatch.answered_parts``).
    Every pair is in exactly one part."""
    groups = plan_loglikelihood(pairs)
    rows = []
    for gi, g in enumerate(groups):
        tokens, scored = model_input(g.rep.ctx, g.rep.cont, setup.max_length)
        rows.append(Row(tuple(tokens), scored, gi, len(g.rep.ctx) + len(g.rep.cont) > setup.max_length + 1))
    fresh: dict[int, tuple[float, bool]] = {}
    given = 0

    def deliver(row: int, logprobs: torch.Tensor) -> None:
        for member in groups[rows[row].group].members:
            fresh[member.index] = torch_ops.score(logprobs, member.cont)

    passes = (
        _score_shared(setup, rows, deliver)
        if setup.share_prefixes
        else _score_plain(setup, rows, list(range(len(rows))), deliver)
    )
    while True:
        with torch.inference_mode():  # per pass: not over the caller's code between passes
            ran = next(passes, None) is not None
        if fresh:
            given += len(fresh)
            yield dict(fresh)
            fresh.clear()
        if not ran:
            break
    if given != len(pairs):
        raise RuntimeError("HFModel lost a request while batching; please report this bug")


def _score_plain(
    setup: ScoringSetup, rows: list[Row], which: list[int], deliver: Callable[[int, torch.Tensor], None]
) -> Passes:
    """Whole rows, longest first, in batches: lm-eval's own computation."""
    for batch in chunk(which, lambda i: setup.batch_size_for(len(rows[i].tokens) + 1)):
        logprobs = torch_ops.continuation_logprobs(
            setup.model,
            [rows[i].tokens for i in batch],
            [rows[i].scored for i in batch],
            setup.device,
            setup.keep_only_needed,
        )
        for i, lp in zip(batch, logprobs):
            deliver(i, lp)
        yield True


def _score_shared(setup: ScoringSetup, rows: list[Row], deliver: Callable[[int, torch.Tensor], None]) -> Passes:
    """Families as trees or behind a cached prefix, lone rows packed, truncated rows plain."""
    whole = [i for i, r in enumerate(rows) if not r.truncated]
    caps = [len(rows[i].tokens) - rows[i].scored for i in whole]
    families, alone = plan_families([rows[i].tokens for i in whole], caps, setup.min_prefix)
    families = [Family(f.prefix_len, tuple(whole[i] for i in f.rows)) for f in families]
    longest = max(len(r.tokens) for r in rows)
    width = max(MIN_ROW_WIDTH, longest)
    trees, cached = [], []
    for fam in families:
        branches = [(rows[i].tokens[fam.prefix_len :], i, rows[i].scored) for i in fam.rows]
        if fam.prefix_len + sum(len(b) for b, _, _ in branches) <= width:
            trees.append(tree(rows[fam.rows[0]].tokens[: fam.prefix_len], branches))
        else:
            cached.append(fam)
    lone = [
        whole[i] for i in alone if len(rows[whole[i]].tokens) < MIN_ROW_WIDTH
    ]  # long ones gain nothing from packing
    trees += [tree(rows[i].tokens, [], row=i, scored=rows[i].scored) for i in lone]
    budget = _Budget(setup.batch_size_for(longest) * width, setup.batch_size_for(longest) * longest)
    yield from _run_packed(setup, pack(trees, width), None, budget, deliver)
    yield from _score_cached(setup, rows, cached, budget, deliver)
    packed = set(lone) | {i for f in families for i in f.rows}
    yield from _score_plain(setup, rows, [i for i in range(len(rows)) if i not in packed], deliver)


@dataclass(frozen=True)
class _Budget:
    """Per pass: tokens run, and scored positions (each costs a vocabulary-sized logits row)."""

    tokens: int
    scored: int


def _run_packed(
    setup: ScoringSetup,
    packed: list[PackedRow],
    states: kv.PrefixStates | None,
    budget: _Budget,
    deliver: Callable[[int, torch.Tensor], None],
) -> Passes:
    """Passes of consecutive packed rows, each within the budget (at least one row per pass)."""
    from evalflow.models.hf.fast import kv

    start = 0
    while start < len(packed):
        end, tokens, scored = start, 0, 0
        while end < len(packed):
            row = packed[end]
            row_scored = sum(n for s in row.segments for _, n in s.scored)
            if end > start and (tokens + row.width > budget.tokens or scored + row_scored > budget.scored):
                break
            tokens, scored, end = tokens + row.width, scored + row_scored, end + 1
        got = kv.packed_logprobs(setup.model, packed[start:end], states, setup.device, setup.exact_keep)
        for i, lp in got.items():
            deliver(i, lp)
        yield True
        start = end


def _score_cached(
    setup: ScoringSetup,
    rows: list[Row],
    families: list[Family],
    budget: _Budget,
    deliver: Callable[[int, torch.Tensor], None],
) -> Passes:
    """Families too big for one row: prefix from the memo or one pass, branches packed behind it."""
    from evalflow.models.hf.fast import kv

    pending = []
    for fam in families:
        found = _from_memo(setup, rows, fam)
        if found is None:
            pending.append(fam)
            continue
        states, n = found
        branches = _branches(rows, fam, n)
        yield from _run_packed(setup, pack(branches, _branch_width(branches), prefix=0), states, budget, deliver)
    pending.sort(key=lambda f: -f.prefix_len)
    for unit in chunk(pending, lambda f: setup.batch_size_for(f.prefix_len)):
        prefixes = [rows[f.rows[0]].tokens[: f.prefix_len] for f in unit]
        states = kv.prefix_states(setup.model, prefixes, setup.device)
        for i, prefix in enumerate(prefixes):
            setup.memo.put(prefix, states.one(i))
        branches = [_branches(rows, f, f.prefix_len) for f in unit]
        narrow = _branch_width([b for bs in branches for b in bs])
        packed = [r for i, bs in enumerate(branches) for r in pack(bs, narrow, prefix=i)]
        yield from _run_packed(setup, sorted(packed, key=lambda r: -r.width), states, budget, deliver)


def _branches(rows: list[Row], fam: Family, n: int) -> list[tuple[Segment, ...]]:
    """Each row of the family after its first ``n`` tokens, as a one-segment tree."""
    return [tree(rows[i].tokens[n:], [], row=i, scored=rows[i].scored) for i in fam.rows]


def _branch_width(branches: list[tuple[Segment, ...]]) -> int:
    """Rows behind a cached prefix as wide as the longest branch (at least ``MIN_ROW_WIDTH``): every
    token of a row attends to the prefix and the whole row, so a row as wide as the longest input
    would make each token pay attention to other documents' tokens it never sees."""
    return max(MIN_ROW_WIDTH, max(sum(len(s.tokens) for s in b) for b in branches))


def _from_memo(setup: ScoringSetup, rows: list[Row], fam: Family) -> tuple[kv.PrefixStates, int] | None:
    """A memo entry covering all but a few tokens of the family's prefix, cut to what they share."""
    prefix = rows[fam.rows[0]].tokens[: fam.prefix_len]
    found = setup.memo.covering(prefix, setup.min_prefix)
    if found is None:
        return None
    states, n = found
    return states.head(n), n
