"""The report's charts, as Vega-Lite specs built with altair: every metric with its stderr across
runs, the metrics along the setting a sweep varies, and the paired differences of two runs.

A sweep may vary several settings (``-m model.salt=a,b num_fewshot=0,1``): the line chart runs
along one of them (``axis``) and draws one line per task, metric and combination of the others,
so two models' points are never joined into one line.

    specs = charts(runs, labels, {"model.salt": ["a", "a", "b", "b"], "num_fewshot": [0, 1, 0, 1]},
                   "num_fewshot", comparison=[])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evalflow.insight.comparison import Comparison
from evalflow.output.run_folder import Run, metric_keys

SERIES_EXCLUDED = ("task", "tasks")  # already in every series' name


def metric_rows(runs: Sequence[Run], labels: Sequence[str]) -> list[dict[str, Any]]:
    """One row per run, task (or group) and metric: its value and value ± stderr."""
    rows = []
    for run, label in zip(runs, labels):
        for name, entry in run.results.get("results", {}).items():
            for metric, filt in metric_keys(entry):
                value = float(entry[f"{metric},{filt}"])
                stderr = entry.get(f"{metric}_stderr,{filt}")
                err = float(stderr) if isinstance(stderr, (int, float)) else 0.0
                rows.append(
                    {
                        "run": label,
                        "task": str(entry.get("alias", name)).strip(),
                        "metric": f"{metric},{filt}",
                        "value": value,
                        "low": value - err,
                        "high": value + err,
                    }
                )
    return rows


def charts(
    runs: Sequence[Run],
    labels: Sequence[str],
    varying: Mapping[str, Sequence[Any]],
    axis: str | None,
    comparison: Sequence[Comparison],
) -> list[tuple[str, dict[str, Any] | None]]:
    """(title, Vega-Lite spec) of each chart; the sweep line only along a numeric setting (the
    bar chart already sets runs of different models or tasks side by side). A spec is None where
    the title says all there is (every bar 0)."""
    rows = metric_rows(runs, labels)
    out: list[tuple[str, dict[str, Any] | None]] = []
    if rows:
        out.append(_bars_or_note(rows))
    if axis is not None and rows and all(isinstance(v, (int, float)) for v in varying[axis]):
        out.append(_sweep_line(rows, labels, varying, axis))  # a line between two models' names means nothing
    differences = _differences(comparison, labels)
    if differences is not None:
        out.append(("Paired differences with 95% intervals", differences))
    return out


def _bars_or_note(rows: list[dict[str, Any]]) -> tuple[str, dict[str, Any] | None]:
    """The bar chart of the metrics with a non-zero value; those whose every bar is 0 (a random
    model's score) would be an empty box, and are named in the title as "all values 0" instead."""
    zero = [
        m
        for m in dict.fromkeys(r["metric"] for r in rows)
        if all(r[k] == 0 for r in rows if r["metric"] == m for k in ("value", "low", "high"))
    ]
    drawn = [r for r in rows if r["metric"] not in zero]
    if not drawn:
        return f"Each metric across runs: all values 0 ({', '.join(zero)})", None
    title = "Each metric with its stderr, across runs"
    return (f"{title} ({', '.join(zero)}: all values 0, not drawn)" if zero else title), _bars(drawn)


def _bars(rows: list[dict[str, Any]]) -> dict[str, Any]:
    import altair as alt

    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=alt.X("task:N", title=None),
            xOffset="run:N",
            y=alt.Y("value:Q", title="value"),
            color=alt.Color("run:N"),
            tooltip=["run:N", "task:N", "metric:N", "value:Q", "low:Q", "high:Q"],
        )
    )
    errors = (
        alt.Chart()
        .mark_errorbar(ticks=True)
        .encode(x="task:N", xOffset="run:N", y=alt.Y("low:Q", title="value"), y2="high:Q")
    )
    chart = alt.layer(bars, errors, data=alt.Data(values=rows)).facet(row=alt.Row("metric:N", title=None))
    return chart.resolve_scale(y="independent").to_dict()


def _sweep_line(
    rows: list[dict[str, Any]], labels: Sequence[str], varying: Mapping[str, Sequence[Any]], axis: str
) -> tuple[str, dict[str, Any]]:
    """Values along ``axis``; one series per task, metric and combination of the other settings."""
    import altair as alt

    others = [k for k in varying if k != axis and k not in SERIES_EXCLUDED]
    at = {label: i for i, label in enumerate(labels)}
    line_rows = []
    for r in rows:
        i = at[r["run"]]
        combination = " ".join(f"{k}={varying[k][i]}" for k in others)
        line_rows.append(
            {**r, axis: varying[axis][i], "series": " ".join(p for p in (r["task"], r["metric"], combination) if p)}
        )
    line = (
        alt.Chart(alt.Data(values=line_rows))
        .mark_line(point=True)
        .encode(
            x=alt.X(f"{axis}:Q", title=axis),
            y=alt.Y("value:Q"),
            color=alt.Color("series:N"),
            detail="series:N",
            tooltip=["series:N", "run:N", f"{axis}:Q", "value:Q"],
        )
    )
    title = f"Metrics along the sweep of {axis}" + (f", one line per {', '.join(others)}" if others else "")
    return title, line.to_dict()


def _differences(comparison: Sequence[Comparison], labels: Sequence[str]) -> dict[str, Any] | None:
    import altair as alt

    rows = [
        {"row": f"{c.task} {c.metric},{c.filter}", "diff": c.diff, "low": c.low, "high": c.high, "p": c.p_value}
        for c in comparison
        if c.low is not None
    ]
    if not rows:
        return None
    base = alt.Chart(alt.Data(values=rows))
    points = base.mark_point(filled=True).encode(
        x=alt.X("diff:Q", title=f"{labels[1]} − {labels[0]}"),
        y=alt.Y("row:N", title=None, sort=None),
        tooltip=["row:N", "diff:Q", "p:Q"],
    )
    rules = base.mark_rule().encode(x="low:Q", x2="high:Q", y=alt.Y("row:N", sort=None))
    return alt.layer(rules, points).to_dict()
