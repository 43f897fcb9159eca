"""Reductions: how a document's ``repeats`` scored samples become the document's value.

lm-eval 0.4.13 scores only the first of a document's k samples; its unreleased 0.5 gives each
``metric_list`` entry a ``reduction`` (default ``take_first``). evalflow spells it the same way::

    metric_list:
      - metric: exact_match
        reduction: [maj@k, pass@k, mean]     # one name, or a list: one result per reduction

The names (one registry, :data:`~evalflow.scoring.registry.REDUCTIONS`, which refuses a second
function under a taken name):

- ``first``: the first sample's value, under the metric's own name (lm-eval 0.4.13's number);
- ``mean`` (avg@k) and ``max`` (best-of-k) over all samples;
- ``pass@k``: the unbiased estimator ``1 - C(n-c, k) / C(n, k)`` (Chen et al. 2021) of a 0/1
  metric (any: exact_match, a code-execution pass/fail) from its n samples, c of them correct;
- ``maj@k``: the most frequent filtered answer among the first k samples (first seen wins a
  tie, as lm-eval's ``majority_vote``), then the metric on that answer.

``k`` is the task's ``repeats``; ``pass@4`` or ``maj@4`` pick another k (at most ``repeats``).
Each result is named ``<metric>_<label>``, the label saying how many samples it read:
``exact_match_pass@8``, ``exact_match_maj@8``, ``exact_match_mean@8``, ``exact_match_max@8``.

>>> samples = RepeatSamples(answers=("7", "8", "7"), values=(1.0, 0.0, 1.0), score=lambda a: float(a == "7"))
>>> [REDUCTIONS.get(name)(samples, 2) for name in ("first", "mean", "max", "pass@k", "maj@k")]
[1.0, 0.6666666666666666, 1.0, 1.0, 1.0]
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evalflow.errors import TaskError, closest
from evalflow.scoring import lazy_numpy as np
from evalflow.scoring.registry import REDUCTIONS, register_reduction

_WITH_K = re.compile(r"^(?P<base>[A-Za-z_][\w-]*)@(?P<k>k|[0-9]+)$")


@dataclass(frozen=True)
class RepeatSamples:
    """One document's samples under one filter pipeline, for one metric.

    ``answers[j]`` is sample j's filtered answer (for a document with several instances, the
    tuple of their values), ``values[j]`` the metric on it, and ``score`` the metric on any
    answer, which a vote (maj@k) needs for the answer it picks.
    """

    answers: tuple[Any, ...]
    values: tuple[Any, ...]
    score: Callable[[Any], Any]


@dataclass(frozen=True)
class Reduction:
    """A ``reduction:`` name resolved against a task: the registered name, its k, its label."""

    name: str  # the registered name: "pass@k", "mean"
    k: int  # the samples it reads (pass@k: the k of the estimator)
    label: str  # "pass@8": the suffix of its result's name

    @property
    def needs(self) -> int:
        """The valued samples a document needs for a result: ``k`` for a reduction that reads k
        of them (``pass@k``, ``maj@k``: a registered name ending ``@k``), else 1. Fewer happen only
        when a judge's unparsed verdicts were left out (``on_unparsed: exclude``); the unbiased
        pass@k estimator is undefined for n < k, and a vote over fewer than k answers is not maj@k,
        so such a document gets no value rather than a different statistic under the same name."""
        return self.k if self.name.endswith("@k") else 1

    def output_name(self, metric: str) -> str:
        """The result's name: the metric's own for ``first``, else ``<metric>_<label>``."""
        return metric if self.name == "first" else f"{metric}_{self.label}"

    def __call__(self, samples: RepeatSamples) -> Any:
        return REDUCTIONS.get(self.name)(samples, self.k)


def parse_reductions(value: Any, repeats: int, where: str) -> tuple[Reduction, ...]:
    """The entry's ``reduction`` (a name or a list of names) resolved for a task with ``repeats``."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise TaskError(f"{where}: the task's repeats must be an int >= 1 to reduce them, got {repeats!r}")
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) for n in names):
        raise TaskError(
            f"{where}: reduction must be a name or a list of names ({', '.join(REDUCTIONS.names())}), got {value!r}"
        )
    out = tuple(_parse(name, repeats, where) for name in names)
    labels = [r.label for r in out]
    for label in labels:
        if labels.count(label) > 1:
            raise TaskError(f"{where}: reduction lists {label} twice; give each reduction once")
    return out


def _parse(name: str, repeats: int, where: str) -> Reduction:
    match = _WITH_K.match(name)
    registered = f"{match['base']}@k" if match else name
    if registered not in REDUCTIONS:
        raise TaskError(
            f"{where}: unknown reduction {name!r}; {closest(registered, REDUCTIONS)} A name ending "
            "@k takes the task's repeats as k, or a number (pass@4)."
        )
    if match is None:
        return Reduction(name, repeats, name if name == "first" else f"{name}@{repeats}")
    k = repeats if match["k"] == "k" else int(match["k"])
    if not 1 <= k <= repeats:
        raise TaskError(
            f"{where}: reduction {name} needs k between 1 and the task's repeats ({repeats}); "
            f"raise 'repeats' to at least {k} or lower k"
        )
    return Reduction(registered, k, f"{match['base']}@{k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator ``1 - C(n-c, k) / C(n, k)``, in the numerically stable product
    form of Chen et al. (2021) and Hugging Face's ``code_eval``, so the numbers are theirs.

    >>> pass_at_k(8, 2, 1), pass_at_k(8, 0, 8), pass_at_k(8, 7, 2)
    (0.25, 0.0, 1.0)
    """
    if not 0 <= c <= n or k > n:
        raise ValueError(f"pass@k is estimated from n >= k samples, c of them correct; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


@register_reduction("first")
def first(samples: RepeatSamples, k: int) -> Any:
    """The first sample's value: lm-eval 0.4.13's behaviour."""
    return samples.values[0]


@register_reduction("mean")
def mean(samples: RepeatSamples, k: int) -> float:
    """The average over all samples (avg@k)."""
    return float(np.mean([_number(v, "mean") for v in samples.values]))


@register_reduction("max")
def best(samples: RepeatSamples, k: int) -> float:
    """The best sample's value (best-of-k)."""
    return float(max(_number(v, "max") for v in samples.values))


@register_reduction("pass@k")
def pass_at(samples: RepeatSamples, k: int) -> float:
    """pass@k from all n samples of a 0/1 metric."""
    values = [_number(v, "pass@k") for v in samples.values]
    if any(v not in (0.0, 1.0) for v in values):
        raise TaskError(
            f"reduction pass@k counts correct samples, so it needs a metric that scores each sample 0 "
            f"or 1; this one gave {sorted(set(values))[:5]}. Use mean or max for graded metrics."
        )
    return pass_at_k(len(values), int(sum(values)), k)


@register_reduction("maj@k")
def majority(samples: RepeatSamples, k: int) -> Any:
    """The metric on the most frequent answer among the first k samples (first seen wins a tie)."""
    answers = samples.answers[:k]
    counts = Counter(_vote_key(a) for a in answers)
    winner = counts.most_common(1)[0][0]
    return samples.score(next(a for a in answers if _vote_key(a) == winner))


def _vote_key(answer: Any) -> str:
    """Equal answers vote together; lists (from a cache round trip) equal the tuples they were."""
    return json.dumps(answer, sort_keys=True, default=repr)


def _number(value: Any, reduction: str) -> float:
    if isinstance(value, (bool, int, float, np.integer, np.floating)):
        return float(value)
    raise TaskError(
        f"reduction {reduction} needs a number per sample, but the metric gave {value!r} "
        f"({type(value).__name__}); reduce metrics that score each sample with a number"
    )
