"""Prefix sharing in log-likelihood passes: each distinct token prefix computed once, no padding.

The fast engine's :attr:`evalflow.models.hf.score.ScoringSetup.shared`. It receives the rows the
reference path built (lm-eval's grouping and truncation, ``score.score_parts``) and delivers each
row's log-probabilities exactly once, as the reference passes would, up to float summation order
(``tests/models/test_hf_kv.py``, ``tests/models/test_hf_engine.py``):

1. Rows that share a token prefix form families (``prefix.plan_families``): a question and its
   choices, or every document of an mmlu subject behind the same five examples.
2. A family small enough for one packed row becomes a tree ``[prefix | branch | branch ...]``;
   trees and lone rows are packed side by side into rows without padding (``pack``).
3. A bigger family (a long few-shot prefix with many documents behind it) runs its prefix once,
   keeps the key/values in a memo that the next chunk of requests finds again, and packs its
   branches into rows that continue that cached prefix.

Rows cut by left truncation, and long rows that share nothing (a rolling window: packing them would
only cost a dense mask), run as the reference runs them (``score.plain_passes``). A pass holds at
most as many scored positions as a batch of lm-eval's would compute logits for (``batch_size`` x
the longest input), so the logits, the largest arrays of a pass, stay within lm-eval's memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalflow.models.hf.batching import chunk
from evalflow.models.hf.fast.pack import PackedRow, Segment, pack, tree
from evalflow.models.hf.fast.prefix import Family, PrefixMemo, plan_families
from evalflow.models.hf.score import Deliver, Passes, Row, ScoringSetup, plain_passes

if TYPE_CHECKING:  # imported where a shared pass runs: importing this module needs no transformers cache layers
    from evalflow.models.hf.fast import kv

MIN_ROW_WIDTH = 256  # packed rows are at least this wide, so a few short questions share one


@dataclass(frozen=True)
class SharedScoring:
    """The shared passes of one loaded model: its prefix memo (shared with generation) and settings."""

    memo: PrefixMemo[Any]  # of kv.PrefixStates
    min_prefix: int  # shorter shared prefixes save less than splitting them off costs
    exact_keep: bool  # the model takes a boolean [batch, length] logits_to_keep

    def __call__(self, setup: ScoringSetup, rows: list[Row], deliver: Deliver) -> Passes:
        """Families as trees or behind a cached prefix, lone rows packed, truncated rows plain."""
        whole = [i for i, r in enumerate(rows) if not r.truncated]
        caps = [len(rows[i].tokens) - rows[i].scored for i in whole]
        families, alone = plan_families([rows[i].tokens for i in whole], caps, self.min_prefix)
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
        yield from self._run_packed(setup, pack(trees, width), None, budget, deliver)
        yield from self._score_cached(setup, rows, cached, budget, deliver)
        packed = set(lone) | {i for f in families for i in f.rows}
        yield from plain_passes(setup, rows, [i for i in range(len(rows)) if i not in packed], deliver)

    def _run_packed(
        self,
        setup: ScoringSetup,
        packed: list[PackedRow],
        states: kv.PrefixStates | None,
        budget: _Budget,
        deliver: Deliver,
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
            got = kv.packed_logprobs(setup.model, packed[start:end], states, setup.device, self.exact_keep)
            for i, lp in got.items():
                deliver(i, lp)
            yield True
            start = end

    def _score_cached(
        self, setup: ScoringSetup, rows: list[Row], families: list[Family], budget: _Budget, deliver: Deliver
    ) -> Passes:
        """Families too big for one row: prefix from the memo or one pass, branches packed behind it."""
        from evalflow.models.hf.fast import kv

        pending = []
        for fam in families:
            found = self._from_memo(rows, fam)
            if found is None:
                pending.append(fam)
                continue
            states, n = found
            branches = _branches(rows, fam, n)
            yield from self._run_packed(
                setup, pack(branches, _branch_width(branches), prefix=0), states, budget, deliver
            )
        pending.sort(key=lambda f: -f.prefix_len)
        for unit in chunk(pending, lambda f: setup.batch_size_for(f.prefix_len)):
            prefixes = [rows[f.rows[0]].tokens[: f.prefix_len] for f in unit]
            states = kv.prefix_states(setup.model, prefixes, setup.device)
            for i, prefix in enumerate(prefixes):
                self.memo.put(prefix, states.one(i))
            per_family = [_branches(rows, f, f.prefix_len) for f in unit]
            narrow = _branch_width([b for bs in per_family for b in bs])
            packed = [r for i, bs in enumerate(per_family) for r in pack(bs, narrow, prefix=i)]
            yield from self._run_packed(setup, sorted(packed, key=lambda r: -r.width), states, budget, deliver)

    def _from_memo(self, rows: list[Row], fam: Family) -> tuple[kv.PrefixStates, int] | None:
        """A memo entry covering all but a few tokens of the family's prefix, cut to what they share."""
        prefix = rows[fam.rows[0]].tokens[: fam.prefix_len]
        found = self.memo.covering(prefix, self.min_prefix)
        if found is None:
            return None
        states, n = found
        return states.head(n), n


@dataclass(frozen=True)
class _Budget:
    """Per pass: tokens run, and scored positions (each costs a vocabulary-sized logits row)."""

    tokens: int
    scored: int


def _branches(rows: list[Row], fam: Family, n: int) -> list[tuple[Segment, ...]]:
    """Each row of the family after its first ``n`` tokens, as a one-segment tree."""
    return [tree(rows[i].tokens[n:], [], row=i, scored=rows[i].scored) for i in fam.rows]


def _branch_width(branches: list[tuple[Segment, ...]]) -> int:
    """Rows behind a cached prefix as wide as the longest branch (at least ``MIN_ROW_WIDTH``): every
    token of a row attends to the prefix and the whole row, so a row as wide as the longest input
    would make each token pay attention to other documents' tokens it never sees."""
    return max(MIN_ROW_WIDTH, max(sum(len(s.tokens) for s in b) for b in branches))
