"""Log-likelihood scoring of token pairs, by lm-eval's rule: the reference path.

:func:`score_pairs` is the one place loglikelihood token pairs meet the model. Pairs with the same
model input share one row (lm-eval's logits cache, ``batching.plan_loglikelihood``); each row is
cut to ``max_length`` by lm-eval's left truncation (``lmeval_tokens.model_input``) and run as
lm-eval runs it: whole, longest first, right-padded, causal attention without a mask
(``torch_ops.continuation_logprobs``); a continuation's log-probability and greediness are read
off its positions (``torch_ops.score``).

This module's source is part of every HF answer's cache key (``hf_model.SEMANTICS``): it holds
what an answer *is*, nothing that only makes it faster. The fast engine's prefix sharing (rows
that share a token prefix run it once, packed without padding) plugs in as
:attr:`ScoringSetup.shared` (``evalflow.models.hf.fast.shared_scoring``), gets the same
:class:`Row` list and hands its answers to the same ``deliver``; this module never imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from evalflow.models.hf import torch_ops
from evalflow.models.hf.batching import chunk, plan_loglikelihood
from evalflow.models.lmeval_tokens import model_input

Pair = tuple[Sequence[int], Sequence[int]]
Passes = Iterator[bool]  # one item after each forward pass, once its rows are delivered
Deliver = Callable[[int, torch.Tensor], None]  # (row index, its scored positions' log-probs)


@dataclass(frozen=True)
class Row:
    """One model input: its tokens, how many final positions are scored, the group it answers."""

    tokens: tuple[int, ...]
    scored: int
    group: int
    truncated: bool


@dataclass(frozen=True)
class ScoringSetup:
    """What scoring needs from a loaded HFModel."""

    model: Any
    device: Any
    max_length: int
    batch_size_for: Callable[[int], int]  # sequence length -> rows per pass
    keep_only_needed: bool  # the model takes an int logits_to_keep
    # The fast engine's passes over all rows (prefix sharing), delivering every row exactly once;
    # None: the reference passes (:func:`plain_passes`).
    shared: Callable[[ScoringSetup, list[Row], Deliver], Passes] | None = None
    group_contexts: bool = True  # lm-eval's logits_cache: pairs with one model input share a row
    softmax_dtype: torch.dtype | None = None  # lm-eval's softmax_dtype; None: the logits' dtype


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
    groups = plan_loglikelihood(pairs, setup.group_contexts)
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
        setup.shared(setup, rows, deliver)
        if setup.shared is not None
        else plain_passes(setup, rows, list(range(len(rows))), deliver)
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


def plain_passes(setup: ScoringSetup, rows: list[Row], which: list[int], deliver: Deliver) -> Passes:
    """Rows ``which``, whole, longest first, in batches: lm-eval's own computation."""
    for batch in chunk(which, lambda i: setup.batch_size_for(len(rows[i].tokens) + 1)):
        logprobs = torch_ops.continuation_logprobs(
            setup.model,
            [rows[i].tokens for i in batch],
            [rows[i].scored for i in batch],
            setup.device,
            setup.keep_only_needed,
            setup.softmax_dtype,
        )
        for i, lp in zip(batch, logprobs):
            deliver(i, lp)
        yield True
