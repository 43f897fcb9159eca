"""A run's tokens, what this run computed of them and what it read from the cache, and their cost.

The run's ``tokens`` (results.json and the manifest, beside lm-eval's keys) are three counts of
the shape :mod:`evalflow.core.tokens` keeps, each with its number of ``generations``:

- ``total``: every task's generations (each task's ``generations`` figures, summed);
- ``computed``: the generations the model produced in this run, counted at the inference edge as
  they arrived (:class:`~evalflow.scale.answer_cache.InferenceCounts`), each request once;
- ``cached``: the rest, ``total`` less ``computed``: answers read from the cache (a task whose whole
  inference stage came from the stage cache never reaches the edge, so all of its are here), and a
  request two tasks share counted again for the second (computed, and paid, once).

Only generations are counted: a backend reports tokens for ``generate_until`` answers, and
loglikelihood requests (multiple choice, perplexity) are not counted, nor are a judge model's calls.

With ``prices`` (:mod:`evalflow.config.prices`) the run's ``cost`` prices each count: prompt tokens
at ``input``, completion tokens at ``output`` except the reasoning ones, at ``reasoning``, all per
million. The cost of ``computed`` is what the run spent; that of ``cached`` what the cache saved.
Generations whose backend reported no counts (a model returning plain strings) are not priced.

    >>> tokens = {"prompt": 2_000_000, "completion": 1_000_000, "reasoning": 400_000, "counted": 10}
    >>> dollars(tokens, Rate(input=0.5, output=2.0, reasoning=3.0))   # 1.0 + 1.2 + 1.2
    3.4
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import reduce
from typing import Any

from evalflow.config.prices import Prices, Rate
from evalflow.core.tokens import TOKEN_KINDS, add_tokens, less_tokens, token_totals
from evalflow.output.run_info import model_name
from evalflow.scale.answer_cache import InferenceCounts

MILLION = 1_000_000


def run_tokens(generations: Mapping[str, Mapping[str, Any]], counts: InferenceCounts) -> dict[str, Any]:
    """The run's tokens (see the module docstring) from each task's ``generations`` figures and the
    inference edge's counts."""
    total = reduce(add_tokens, (stats["tokens"] for stats in generations.values()), token_totals(()))
    n_total = sum(stats["generations"] for stats in generations.values())
    # no generation computed (a cached run): 0 of each kind the run reported, not "not reported"
    computed = counts.computed_tokens if counts.computed_generations else less_tokens(total, total)
    return {
        "total": {**total, "generations": n_total},
        "computed": {**computed, "generations": counts.computed_generations},
        "cached": {**less_tokens(total, counts.computed_tokens), "generations": n_total - counts.computed_generations},
    }


def rate_for(prices: Prices | None, model: Mapping[str, Any]) -> Rate | None:
    """The prices of the run's ``model`` (its config, or ``run_info.object_model`` of an object),
    looked up by the name results.json gives it: called before any model call, so a prices file
    without the model fails the run before it spends anything."""
    return None if prices is None else prices.rate_for(model_name(model))


def run_cost(tokens: Mapping[str, Any], prices: Prices | None, model: Mapping[str, Any]) -> dict[str, Any] | None:
    """The run's ``cost``: the dollars of its computed and cached tokens, and the prices used; None
    without ``prices``."""
    rate = rate_for(prices, model)
    if prices is None or rate is None:
        return None
    computed, cached = dollars(tokens["computed"], rate), dollars(tokens["cached"], rate)
    return {
        "computed": computed,
        "cached": cached,
        "total": computed + cached,
        "model_name": model_name(model),
        "per_million": {"input": rate.input, "output": rate.output, "reasoning": rate.reasoning},
        "prices_file": prices.file,  # None: an in-line mapping
    }


def dollars(tokens: Mapping[str, Any], rate: Rate) -> float:
    """What ``tokens`` cost at ``rate`` (a kind not reported costs nothing: it is not counted)."""
    prompt, completion, reasoning = (tokens.get(kind) or 0 for kind in TOKEN_KINDS)
    return (prompt * rate.input + (completion - reasoning) * rate.output + reasoning * rate.reasoning) / MILLION


def token_line(manifest: Mapping[str, Any]) -> str | None:
    """One line: the run's tokens, and how many of its generations it computed and read from the
    cache; None when no generation reported tokens."""
    tokens = manifest.get("tokens")
    if not tokens or tokens["total"]["counted"] == 0:
        return None
    total, computed, cached = tokens["total"], tokens["computed"], tokens["cached"]
    unpriced = total["generations"] - total["counted"]
    note = f"; {unpriced} reported no token counts" if unpriced else ""
    return (
        f"tokens: {_kinds(total)} in {total['generations']:,} generations{note}: {computed['generations']:,} "
        f"computed by this run ({_kinds(computed)}), {cached['generations']:,} read from the cache ({_kinds(cached)})"
    )


def cost_line(manifest: Mapping[str, Any]) -> str | None:
    """One line: what the run's computed generations cost and what the cached ones saved."""
    cost, tokens = manifest.get("cost"), manifest.get("tokens")
    if not cost or not tokens:
        return None
    rate, source = cost["per_million"], cost["prices_file"] or "the in-line prices"
    return (
        f"cost: {money(cost['computed'])} for this run's {tokens['computed']['generations']:,} computed generations; "
        f"{money(cost['cached'])} saved by {tokens['cached']['generations']:,} answers read from the cache "
        f"(prices for {cost['model_name']} from {source}: ${rate['input']:g} input, ${rate['output']:g} "
        f"output, ${rate['reasoning']:g} reasoning per million tokens)"
    )


def money(value: float) -> str:
    """Dollars to the cent, and a cost under a dollar to four significant digits (a small run's).

    >>> money(1234.567), money(0.000788), money(0.0)
    ('$1,234.57', '$0.000788', '$0')
    """
    return f"${value:,.2f}" if value >= 1 else f"${value:.4g}"


def _kinds(tokens: Mapping[str, Any]) -> str:
    shown = [f"{tokens[kind]:,} {kind}" for kind in TOKEN_KINDS if tokens.get(kind) is not None]
    return ", ".join(shown) if shown else "no tokens"
