"""Whether two compared runs cut off different shares of a task's generations.

A drop that comes with more truncation is more likely a shorter ``max_gen_toks`` budget (or a
changed ``think_end_token``, or a chattier prompt) than a worse model: the cut-off answers score as
wrong. ``compare`` and its release gate say so per task, beside the verdict, without changing it (a
failing gate still fails; the line tells what to look at first).

The rule, read from each run's results.json ``generations`` (evalflow runs; an lm-eval folder
records no stop reasons, so it is never said): a task's truncation rate is *known* in a run when
some of its generations reported a stop reason; the two rates *differ* when both are known, they
are at least :data:`MIN_POINTS` apart (one percentage point), and Fisher's exact test of the 2x2
table (truncated or finished, in A or in B) gives ``p < alpha``, the compare's level. Fisher's test
treats the runs' generations as independent samples, which for the same documents is conservative.

    >>> a = {"generations": 40, "truncated": 0, "stop_reasons": {"eos": 40}, "max_gen_toks": 64}
    >>> b = {"generations": 40, "truncated": 13, "stop_reasons": {"eos": 27, "length": 13}, "max_gen_toks": 32}
    >>> change = truncation_change("gsm8k", a, b, alpha=0.05)
    >>> change.differs, round(change.p_value, 6)
    (True, 7.6e-05)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalflow.insight.stats import fisher_exact
from evalflow.output.run_folder import Run

MIN_POINTS = 0.01  # the smallest difference of truncated shares worth a line: one percentage point
UNKNOWN = "unknown"  # a stop reason no backend reported (output/generations.py)


@dataclass(frozen=True)
class TruncationChange:
    """One task's truncated generations in A and in B, and whether the shares differ (see the rule)."""

    task: str
    a_truncated: int
    a_generations: int
    b_truncated: int
    b_generations: int
    p_value: float
    differs: bool
    a_max_gen_toks: int | None = None  # the cap each run's cut-off generations hit
    b_max_gen_toks: int | None = None
    a_finished_score: float | None = None  # the first metric both report, on finished generations
    b_finished_score: float | None = None
    metric: str | None = None

    @property
    def a_share(self) -> float:
        return self.a_truncated / self.a_generations

    @property
    def b_share(self) -> float:
        return self.b_truncated / self.b_generations


def truncation_changes(run_a: Run, run_b: Run, tasks: Sequence[str], alpha: float) -> list[TruncationChange]:
    """Each task of ``tasks`` whose truncation rate both runs know, compared."""
    stats_a, stats_b = run_a.results.get("generations") or {}, run_b.results.get("generations") or {}
    out = []
    for task in tasks:
        a, b = stats_a.get(task) or {}, stats_b.get(task) or {}
        if _known(a) and _known(b):
            out.append(truncation_change(task, a, b, alpha))
    return out


def _known(stats: Mapping[str, Any]) -> bool:
    """Whether a task's figures give a truncation rate: some generation reported why it stopped."""
    return bool(stats.get("generations")) and bool(set(stats.get("stop_reasons", {})) - {UNKNOWN})


def truncation_change(task: str, a: Mapping[str, Any], b: Mapping[str, Any], alpha: float) -> TruncationChange:
    """One task's figures in A and B (results.json's ``generations[task]``) compared by the rule."""
    cut_a, n_a, cut_b, n_b = a["truncated"], a["generations"], b["truncated"], b["generations"]
    p = fisher_exact(cut_a, n_a - cut_a, cut_b, n_b - cut_b)
    finished_a, finished_b = a.get("finished_score") or {}, b.get("finished_score") or {}
    metric = next((k for k in finished_a if finished_a[k] is not None and finished_b.get(k) is not None), None)
    return TruncationChange(
        task,
        cut_a,
        n_a,
        cut_b,
        n_b,
        p,
        round(abs(cut_b / n_b - cut_a / n_a), 12) >= MIN_POINTS and p < alpha,  # rounded: 0.11 - 0.10 is a point
        a.get("max_gen_toks"),
        b.get("max_gen_toks"),
        None if metric is None else finished_a[metric],
        None if metric is None else finished_b[metric],
        metric,
    )


def truncation_line(change: TruncationChange, alpha: float) -> str:
    """The line ``compare`` prints for a task whose rates differ."""
    more = "B" if change.b_share > change.a_share else "A"
    head = (
        f"TRUNCATION: {change.task}: A cut off {change.a_truncated} of {change.a_generations} generations "
        f"({100 * change.a_share:.1f}%), B {change.b_truncated} of {change.b_generations} "
        f"({100 * change.b_share:.1f}%); Fisher p={change.p_value:.4g} < alpha={alpha:g}."
    )
    why = (
        f" {more} truncated more: a score difference that comes with it is likely a shorter max_gen_toks budget "
        f"(A {_cap(change.a_max_gen_toks)}, B {_cap(change.b_max_gen_toks)}) or unclosed thinking, not a "
        f"{'worse' if more == 'B' else 'better'} model."
    )
    if change.metric is None:
        return head + why
    return (
        head + why + f" On the generations that finished, {change.metric} is A {change.a_finished_score:.4f}, "
        f"B {change.b_finished_score:.4f}."
    )


def _cap(cap: int | None) -> str:
    return "the model's default" if cap is None else str(cap)
