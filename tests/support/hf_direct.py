"""The HF backend's answers written out the slow, obvious way (lm-eval's context/continuation split,
one sequence per forward pass), which the HF tests compare the backend's batched answers with."""

from __future__ import annotations

import pytest
import torch


def direct_pair(tok, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """lm-eval's split, written out: move trailing space, encode whole and context, cut."""
    if context == "":
        cont = tok.encode(continuation, add_special_tokens=False)
        return [tok.bos_token_id], cont
    stripped = context.rstrip()
    continuation = context[len(stripped) :] + continuation
    special = not stripped.startswith(tok.bos_token)
    whole = tok.encode(stripped + continuation, add_special_tokens=special)
    ctx = tok.encode(stripped, add_special_tokens=special)
    return ctx, whole[len(ctx) :]


def direct_score(model, ctx: list[int], cont: list[int], max_length: int = 10**9) -> tuple[float, bool]:
    """One sequence, one forward pass, float64 sums: log P(cont | ctx) and greedy-ness."""
    inp = (ctx + cont)[-(max_length + 1) :][:-1]
    with torch.no_grad():
        logits = model(torch.tensor([inp])).logits[0]
    lp = torch.log_softmax(logits, dim=-1)[-len(cont) :]
    target = torch.tensor(cont)
    return float(lp.gather(1, target[:, None]).double().sum()), bool((lp.argmax(-1) == target).all())


def assert_close(got, want, tol=1e-5):
    """Log-likelihoods within ``tol`` of ``want``'s, and the same greedy flags."""
    assert len(got) == len(want)
    for (g, gg), (w, wg) in zip(got, want):
        assert g == pytest.approx(w, abs=tol)
        assert gg == wg
