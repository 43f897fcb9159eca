"""The compare view's JSON: ``compare``'s paired rows and gate verdicts for a baseline and a
candidate run, and the documents that flipped between them with both answers side by side.

The rows, the gate and the truncation lines are those ``python -m evalflow compare`` prints
(:func:`evalflow.insight.comparison.compare`, :func:`~evalflow.insight.comparison.verdicts`,
:mod:`evalflow.insight.truncation_change`), so the page and the command cannot disagree. A flip is
a document of a leaf task whose 0/1 metric (one that got McNemar's test) differs between the runs
under the same filter: the rows that make up the paired test's discordant count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evalflow.insight.comparison import DEFAULT_ITERS, Comparison, compare, verdicts
from evalflow.insight.gate import GateSettings, failures
from evalflow.insight.truncation_change import truncation_changes, truncation_line
from evalflow.output.run_folder import Run

MAX_FLIPS = 500
TEXT_LIMIT = 2000  # each answer and target in a flip row is cut here (the sample view has them whole)


def compare_payload(
    run_a: Run,
    run_b: Run,
    gate: GateSettings | None = None,
    iters: int = DEFAULT_ITERS,
    seed: int = 1234,
    max_flips: int = MAX_FLIPS,
) -> dict[str, Any]:
    """``{"rows", "gate", "truncation", "flips"}`` of baseline ``run_a`` against candidate ``run_b``;
    ``gate``: the gate's settings (None: compare's defaults judge the rows, and ``gate`` is null)."""
    judge = gate or GateSettings()
    rows = compare(run_a, run_b, iters, seed, judge.alpha)
    judged = verdicts(rows, judge)
    shifts = truncation_changes(run_a, run_b, [t for t in run_a.tasks() if t in run_b.tasks()], judge.alpha)
    return {
        "rows": [_row(r, v.reason, v.failed, judge.alpha) for r, v in zip(rows, judged, strict=True)],
        "gate": None if gate is None else gate_lines(judged),
        "truncation": [truncation_line(c, judge.alpha) for c in shifts if c.differs],
        "flips": flips(run_a, run_b, rows, max_flips),
    }


def gate_lines(judged: Sequence[Any]) -> list[str]:
    """The lines ``compare ... max_drop=`` prints: each regression and each row not gated, then the verdict."""
    failed = failures(judged)
    lines = [
        f"{'REGRESSION' if v.failed else 'NOT GATED'}: {v.name}: {v.reason}"
        for v in judged
        if v.failed or v.reason.startswith("not gated")
    ]
    lines.append(f"gate: {len(failed)} regression(s) in {len(judged)} metric(s); {'FAILED' if failed else 'passed'}")
    return lines


def _row(r: Comparison, verdict: str, failed: bool, alpha: float) -> dict[str, Any]:
    return {
        "name": f"{r.task} (group)" if r.group else r.task,
        "task": r.task,
        "group": r.group,
        "metric": r.metric,
        "filter": r.filter,
        "a": r.a,
        "b": r.b,
        "difference": r.diff,
        "low": r.low,
        "high": r.high,
        "p_value": r.p_value,
        "test": r.test,
        "n": r.n,
        "note": r.note,
        "detectable": r.detectable,
        "higher_is_better": r.higher_is_better,
        "verdict": verdict,
        "failed": failed,
        "significant": r.p_value is not None and r.p_value < alpha,
    }


def flips(run_a: Run, run_b: Run, rows: Sequence[Comparison], limit: int = MAX_FLIPS) -> dict[str, Any]:
    """``{"total", "rows"}``: every flipped document counted, the first ``limit`` listed, each with
    both runs' answers and the target, read from the samples records."""
    total, out = 0, list[dict[str, Any]]()
    for r in rows:
        if r.group or not (r.test or "").startswith("mcnemar"):
            continue
        va, vb = run_a.per_doc(r.task, r.metric, r.filter), run_b.per_doc(r.task, r.metric, r.filter)
        changed = sorted(d for d in va.keys() & vb.keys() if va[d] != vb[d])
        total += len(changed)
        room = max(0, limit - len(out))
        if not room or not changed:
            continue
        recs_a, recs_b = _records(run_a, r.task, r.filter), _records(run_b, r.task, r.filter)
        for d in changed[:room]:
            a, b = recs_a.get(d, {}), recs_b.get(d, {})
            out.append(
                {
                    "task": r.task,
                    "doc_id": d,
                    "filter": r.filter,
                    "metric": r.metric,
                    "a": va[d],
                    "b": vb[d],
                    "answer_a": answer_text(a),
                    "answer_b": answer_text(b),
                    "target": target_text(a or b),
                }
            )
    return {"total": total, "rows": out}


def _records(run: Run, task: str, filt: str) -> dict[int, Mapping[str, Any]]:
    return {int(r["doc_id"]): r for r in run.rows(task) if str(r.get("filter", "none")) == filt}


def answer_text(record: Mapping[str, Any]) -> str:
    """What the model answered, as the samples record keeps it: the filtered answer (a generation
    after its filter), else the chosen choice of a multiple-choice document, else the raw response."""
    filtered = record.get("filtered_resps")
    if isinstance(filtered, list) and filtered:
        chosen = _chosen_choice(record, filtered)
        if chosen is not None:
            return _cut(chosen)
        first = filtered[0]
        return _cut(first[0] if isinstance(first, list) and first else first)
    resps = record.get("resps")
    return _cut(resps[0][0] if isinstance(resps, list) and resps and isinstance(resps[0], list) else resps)


def _chosen_choice(record: Mapping[str, Any], filtered: list[Any]) -> str | None:
    """A loglikelihood document's answer: the choice with the highest log-likelihood."""
    scores = [f[0] if isinstance(f, list) and f else f for f in filtered]
    if len(scores) < 2 or not all(isinstance(s, (int, float)) and not isinstance(s, bool) for s in scores):
        return None
    best = max(range(len(scores)), key=lambda i: scores[i])
    choices = _choices(record)
    return choices[best] if best < len(choices) else f"choice {best}"


def _choices(record: Mapping[str, Any]) -> list[str]:
    """The continuations of a multiple-choice document's requests: each request's second argument
    (``{"gen_args_0": {"arg_0": context, "arg_1": continuation}, ...}`` in a samples record)."""
    args = record.get("arguments")
    items = list(args.values()) if isinstance(args, Mapping) else args if isinstance(args, list) else []
    out = []
    for item in items:
        pair = list(item.values()) if isinstance(item, Mapping) else item
        if isinstance(pair, (list, tuple)) and len(pair) >= 2:
            out.append(str(pair[1]))
    return out


def target_text(record: Mapping[str, Any]) -> str:
    """The target as a reader wants it: a multiple-choice target's index shown as that choice."""
    target = record.get("target")
    choices = _choices(record)
    if isinstance(target, int) and not isinstance(target, bool) and 0 <= target < len(choices) > 1:
        return _cut(choices[target])
    return _cut(target)


def _cut(value: Any) -> str:
    text = "" if value is None else value if isinstance(value, str) else str(value)
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + "…"
