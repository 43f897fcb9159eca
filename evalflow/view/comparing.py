"""The compare view's JSON: ``compare``'s paired rows and gate verdicts for a baseline and a
candidate run, and the documents that flipped between them with both answers side by side.

The rows, the gate and the truncation lines are those ``python -m evalflow compare`` prints
(:func:`evalflow.insight.comparison.compare`, :func:`~evalflow.insight.comparison.verdicts`,
:mod:`evalflow.insight.truncation_change`), so the page and the command cannot disagree. A flip is
a document of a leaf task whose 0/1 metric (one that got McNemar's test) differs between the runs
under the same filter: the rows that make up the paired test's discordant count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from evalflow.insight.comparison import DEFAULT_ITERS, Comparison, compare, missing_tasks, verdicts
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
    alpha: float = GateSettings.alpha,
) -> dict[str, Any]:
    """``{"rows", "gate", "truncation", "flips"}`` of baseline ``run_a`` against candidate ``run_b``;
    ``gate``: the gate's settings (None: no gate was asked for: each row's ``verdict`` and ``gate``
    are null, and ``alpha`` is the level a row is significant at)."""
    judge = gate or GateSettings(alpha=alpha)
    rows = compare(run_a, run_b, iters, seed, judge.alpha)
    judged = verdicts(rows, judge)
    shifts = truncation_changes(run_a, run_b, [t for t in run_a.tasks() if t in run_b.tasks()], judge.alpha)
    # no gate asked for: no verdict (a default max_drop=0 verdict on every row reads as a gate the user never set)
    return {
        "rows": [
            _row(r, v.reason if gate else None, v.failed if gate else None, judge.alpha)
            for r, v in zip(rows, judged, strict=True)
        ],
        "gate": None if gate is None else gate_lines([*judged, *missing_tasks(run_a, run_b)]),
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


def _row(r: Comparison, verdict: str | None, failed: bool | None, alpha: float) -> dict[str, Any]:
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
        delim_a, delim_b = _delimiter(run_a, r.task), _delimiter(run_b, r.task)
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
                    "answer_a": answer_text(a, r.metric, delim_a),
                    "answer_b": answer_text(b, r.metric, delim_b),
                    "target": target_text(a or b),
                }
            )
    return {"total": total, "rows": out}


def _records(run: Run, task: str, filt: str) -> dict[int, Mapping[str, Any]]:
    return {int(r["doc_id"]): r for r in run.rows(task) if str(r.get("filter", "none")) == filt}


def _delimiter(run: Run, task: str) -> str:
    """The task's ``target_delimiter`` (what lm-eval put before each choice in its requests)."""
    config = (run.results.get("configs") or {}).get(task) or {}
    value = config.get("target_delimiter", " ") if isinstance(config, Mapping) else " "
    return value if isinstance(value, str) else " "


RAW_LABEL = " (the raw log-likelihood argmax; {metric} scores another choice rule)"


def answer_text(record: Mapping[str, Any], metric: str | None = None, delimiter: str = " ") -> str:
    """What the model answered, as ``metric`` scored it: a generation's filtered answer, else the
    raw response; for a multiple-choice document, the choice the metric picked: ``acc`` the
    highest log-likelihood, ``acc_norm`` the highest per character of the choice and
    ``acc_bytes`` per byte (lm-eval's ``process_results``); any other metric (``acc_mutual_info``
    needs the unconditional log-likelihoods) shows the raw argmax, labelled as such."""
    filtered = record.get("filtered_resps")
    if isinstance(filtered, list) and filtered:
        chosen = _chosen_choice(record, filtered, metric, delimiter)
        if chosen is not None:
            return _cut(chosen)
        first = filtered[0]
        return _cut(first[0] if isinstance(first, list) and first else first)
    resps = record.get("resps")
    return _cut(resps[0][0] if isinstance(resps, list) and resps and isinstance(resps[0], list) else resps)


_PER_LENGTH: dict[str, Callable[[str], int]] = {
    "acc_norm": len,
    "acc_bytes": lambda text: len(text.encode("utf-8")),
}


def _chosen_choice(record: Mapping[str, Any], filtered: list[Any], metric: str | None, delimiter: str) -> str | None:
    """A loglikelihood document's answer under ``metric``'s rule (see :func:`answer_text`)."""
    scores = [f[0] if isinstance(f, list) and f else f for f in filtered]
    if len(scores) < 2 or not all(isinstance(s, (int, float)) and not isinstance(s, bool) for s in scores):
        return None
    choices = _choices(record)
    raw = max(range(len(scores)), key=lambda i: scores[i])
    if metric in _PER_LENGTH and len(choices) == len(scores):
        # lm-eval divides by the length of the choice as doc_to_choice gave it, before the delimiter
        texts = [c[len(delimiter) :] if delimiter and c.startswith(delimiter) else c for c in choices]
        lengths = np.array([float(_PER_LENGTH[metric](t)) for t in texts])
        with np.errstate(divide="ignore", invalid="ignore"):
            best = int(np.argmax(np.array(scores, dtype=float) / lengths))
        return choices[best]
    shown = choices[raw] if raw < len(choices) else f"choice {raw}"
    if metric is None or metric == "acc":
        return shown
    return shown + RAW_LABEL.format(metric=metric)


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
