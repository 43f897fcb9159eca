"""The release gate of ``compare A B max_drop=X alpha=Y``: which rows are regressions, and how small
a difference the paired documents could have shown at all.

A row is a regression when B is worse than A by more than ``max_drop`` in the metric's own
direction (``higher_is_better`` from results.json; lower-is-better metrics are reversed) *and*
the paired test says the drop is not noise (``p < alpha``). A row whose direction is unknown is
never silently passed: it is listed as not gated. A drop beyond ``max_drop`` on a metric that
has no paired test (not a mean of per-document values) fails the gate, since nothing shows it is
noise.

The smallest detectable difference answers "would this comparison have caught a real drop?":
with 50 arc_easy documents on which the runs disagree 29 times, a drop from 0.46 to 0.28 (9 more
documents lost than won) has McNemar p = 0.136; at alpha 0.05 these documents could only have
shown a difference of 0.26 or more (13 more one way than the other).

    >>> mcnemar_detectable(n=50, discordant=29, alpha=0.05)
    0.26
    >>> mcnemar_detectable(n=5, discordant=0, alpha=0.05) is None   # 5 documents can never be significant
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evalflow.errors import ConfigError, closest
from evalflow.output.run_paths import RESULTS


@dataclass(frozen=True)
class GateSettings:
    """``max_drop``: the largest tolerated drop (in the metric's units); ``alpha``: the test level."""

    max_drop: float = 0.0
    alpha: float = 0.05

    def __post_init__(self) -> None:
        if not (self.max_drop >= 0 and np.isfinite(self.max_drop)):
            raise ConfigError(f"compare: max_drop={self.max_drop} is out of range; use 0 or more (max_drop=0.01)")
        if not 0 < self.alpha < 1:
            raise ConfigError(f"compare: alpha={self.alpha} is out of range; use a level in (0, 1) (alpha=0.05)")


@dataclass(frozen=True)
class RowChoice:
    """``rows=``: the rows a gate judges, each a task or group name, optionally ``:METRIC`` and
    ``@FILTER`` (``rows=mmlu`` gates the group's every metric, ``rows=gsm8k:exact_match@strict-match``
    one filter of one metric). A release usually ships on its headline numbers; gating every
    subtask splits the error budget over all of them (the sequential gate then needs far more
    documents to decide each). Empty: every row."""

    items: tuple[tuple[str, str | None, str | None], ...] = ()

    @classmethod
    def parse(cls, value: str) -> RowChoice:
        """NAME[:METRIC[@FILTER]], comma-separated: rows=mmlu,gsm8k:exact_match@strict-match"""
        items = []
        for item in value.split(","):
            name, colon, rest = item.strip().partition(":")
            metric, at, filt = rest.partition("@")
            if not name or (colon and not metric) or (at and not filt):
                raise ValueError(value)
            items.append((name, metric or None, filt or None))
        return cls(tuple(items))

    def takes(self, task: str, metric: str, filt: str) -> bool:
        return not self.items or any(self._matches(item, (task, metric, filt)) for item in self.items)

    @staticmethod
    def _matches(item: tuple[str, str | None, str | None], row: tuple[str, str, str]) -> bool:
        return item[0] == row[0] and item[1] in (None, row[1]) and item[2] in (None, row[2])

    def check(self, rows: Iterable[tuple[str, str, str]], where: str) -> None:
        """Each chosen item names at least one of ``rows`` ((task or group, metric, filter)), else
        one paragraph naming the closest."""
        rows = list(rows)
        for item in self.items:
            if not any(self._matches(item, row) for row in rows):
                name, metric, filt = item
                wanted = name + (f":{metric}" if metric else "") + (f"@{filt}" if filt else "")
                known = sorted({f"{n}:{m}@{f}" for n, m, f in rows} | {n for n, _, _ in rows})
                raise ConfigError(
                    f"{where}: rows={wanted} names no row the gate can judge in the baseline; {closest(wanted, known)}"
                )

    def leaves(self, tasks: Sequence[str], groups: Mapping[str, Sequence[str]], where: str) -> list[str]:
        """The leaf tasks of the chosen rows (every one of ``tasks`` when none is chosen), of a
        run with these ``tasks`` and ``groups`` (each group's leaves); a name that is neither is
        refused in one paragraph (a tag has no number of its own: name its tasks or group)."""
        known = [*tasks, *groups]
        leaves: list[str] = []
        for name in dict.fromkeys(n for n, _, _ in self.items) if self.items else tasks:
            if name not in known:
                raise ConfigError(
                    f"{where}: rows={name} names no task or group of the baseline; {closest(name, known)} "
                    "(rows= separates rows by commas and names a filter with @: rows=gsm8k:exact_match@strict-match; "
                    "a tag has no number of its own: name its tasks or its group)"
                )
            leaves.extend(t for t in groups.get(name, [name]) if t not in leaves)
        return leaves


EVERY_ROW = RowChoice()


@dataclass(frozen=True)
class Verdict:
    """One compared row, judged: ``failed`` rows fail the build; ``reason`` says why (or why not gated)."""

    name: str  # "task metric,filter"
    failed: bool
    reason: str


def mcnemar_detectable(n: int, discordant: int, alpha: float) -> float | None:
    """The smallest |mean(B) - mean(A)| the exact McNemar test calls significant at ``alpha``,
    over ``n`` paired 0/1 documents with at least ``discordant`` of them disagreeing.

    With ``d`` discordant documents split ``m`` / ``d - m``, the difference is ``(d - 2m) / n`` and
    the p-value ``2 * P(Binomial(d, 1/2) <= m)``; the largest significant ``m`` gives the smallest
    difference. Fewer discordant documents than any significant split needs are topped up to the
    smallest count that can be significant (all of them one way). None: no split of ``n``
    documents is significant.
    """
    from scipy.stats import binom

    for d in range(max(discordant, 1), n + 1):
        minority = np.arange(d // 2 + 1)
        significant = np.nonzero(2.0 * binom.cdf(minority, d, 0.5) < alpha)[0]
        if significant.size:
            return round((d - 2 * int(significant[-1])) / n, 12)
    return None


def bootstrap_detectable(distribution: np.ndarray, alpha: float) -> float:
    """Half the width of the bootstrap's central ``1 - alpha`` interval of the difference: a true
    difference smaller than this leaves 0 inside the interval the p-value is read from."""
    low, high = np.percentile(distribution, [alpha * 50.0, 100.0 - alpha * 50.0])
    return float(high - low) / 2.0


def judge(name: str, diff: float, higher_is_better: bool | None, p_value: float | None, gate: GateSettings) -> Verdict:
    """Whether one row (B - A = ``diff``) is a regression under ``gate``."""
    if higher_is_better is None:
        return Verdict(name, False, f"not gated: {RESULTS} does not say whether higher is better")
    change = diff if higher_is_better else -diff
    worse = "dropped" if higher_is_better else "rose"
    if change >= -gate.max_drop:
        return Verdict(name, False, f"within max_drop={gate.max_drop:g}")
    if p_value is None:
        return Verdict(
            name,
            True,
            f"{worse} by {abs(diff):.4f} > max_drop={gate.max_drop:g}; no paired test "
            "can say it is noise (not a mean of per-document values)",
        )
    if p_value < gate.alpha:
        return Verdict(
            name,
            True,
            f"{worse} by {abs(diff):.4f} > max_drop={gate.max_drop:g}, p={p_value:.4g} < alpha={gate.alpha:g}",
        )
    return Verdict(
        name,
        False,
        f"{worse} by {abs(diff):.4f}, but p={p_value:.4g} >= alpha={gate.alpha:g}: "
        "not distinguishable from noise on these documents",
    )


def failures(verdicts: Sequence[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if v.failed]
