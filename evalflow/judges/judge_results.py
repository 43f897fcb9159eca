"""What the aggregate of a task's judge metrics adds to lm-eval's numbers: nothing hidden.

An unparsed judge answer is never a silent 0, so the aggregate stage reports, per judge metric and
filter, how many judge answers did not parse (``helpful_unparsed,none``), a result that no document
has a value for as ``None``, and the documents a reduction left out (``_excluded``), all counts
reported lower-is-better. :func:`judge_results` is what the aggregate stage calls; it reads the
task's resolved metrics through :class:`ScoredMetric`, the part of scoring's ``MetricSpec`` it needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from evalflow.core.records import Scores
from evalflow.judges.judge_spec import JudgeSpec


class ScoredMetric(Protocol):
    """What the judges read of a resolved ``metric_list`` entry (scoring's ``MetricSpec``): whether it
    is a judge metric, the results it reports, and whether a reduction makes them."""

    @property
    def judge(self) -> JudgeSpec | None: ...

    @property
    def output_names(self) -> tuple[str, ...]: ...

    @property
    def reductions(self) -> Sequence[object]: ...


def judge_results(specs: Sequence[ScoredMetric], scores: Scores) -> tuple[dict[str, Any], dict[str, bool]]:
    """What the aggregate stage adds for judge metrics: the values (:func:`judge_gaps`, then
    :func:`unparsed_counts`) and the direction of the counts among them (fewer is better)."""
    gaps, unparsed = judge_gaps(specs, scores), unparsed_counts(scores)
    counts = [*unparsed, *(key for key in gaps if key.split(",", 1)[0].endswith("_excluded"))]
    return {**gaps, **unparsed}, {key.split(",", 1)[0]: False for key in counts}


def unparsed_counts(scores: Scores) -> dict[str, int]:
    """``{"<metric>_unparsed,<filter>": n}``: judge answers that did not parse, per metric and filter."""
    out: dict[str, int] = {}
    for name, docs in scores.judged.items():
        for judged in docs:
            for metric, rows in judged.items():
                key = f"{metric}_unparsed,{name}"
                out[key] = out.get(key, 0) + sum(1 for r in rows if not r["parsed"])
    return out


def judge_gaps(specs: Sequence[ScoredMetric], scores: Scores) -> dict[str, Any]:
    """What the aggregate of judge metrics lacks, made explicit (``on_unparsed: exclude`` leaves a
    document without a value, and an aggregate over no document is not computed at all):

    - a result no document has a value for (every verdict unparsed) is still reported, as
      ``None`` (null in results.json) with stderr ``N/A``, so it cannot vanish from a run;
    - a reduction's result gets ``<result>_excluded,<filter>``: the documents left out of it
      (every sample unparsed, or fewer than k parsed for pass@k / maj@k).
    """
    out: dict[str, Any] = {}
    for spec in specs:
        if spec.judge is None or spec.judge.on_unparsed is not None:
            continue
        for name, rows in scores.by_filter.items():
            for result in spec.output_names:
                lacking = sum(1 for row in rows if result not in row)
                if rows and lacking == len(rows):
                    out[f"{result},{name}"], out[f"{result}_stderr,{name}"] = None, "N/A"
                if spec.reductions:
                    out[f"{result}_excluded,{name}"] = lacking
    return out
