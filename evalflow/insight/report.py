"""``python -m evalflow report RUN... [out=report.html]``: one self-contained HTML page of runs.

The page holds the results table of each run (groups with their subtasks), a bar chart of every
metric with its stderr across runs, a line chart along the setting a sweep varies (give the
multirun folder, or several runs), the paired comparison of ``compare`` when two runs are given,
and each document's prompt, answers, filtered answer and scores, which a checkbox narrows to the
documents the two runs disagree on. Charts are Vega-Lite specs built with altair; the Vega
libraries are inlined from vl-convert's bundle, so the file opens with no network::

    python -m evalflow report outputs/multirun/2026-11-30/12-00-00 out=sweep.html
    python -m evalflow report outputs/run_a peer-out/ out=a_vs_b.html

Needs the ``insight`` extra: ``pip install "evalflow[insight]"``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from evalflow.cli_words import Usage, parse_words
from evalflow.errors import ConfigError, RunFolderError
from evalflow.insight.compare import COLUMNS as COMPARE_COLUMNS
from evalflow.insight.compare import Comparison, as_table_rows, compare
from evalflow.insight.report_page import PAGE
from evalflow.insight.runs import Run, load_run, metric_keys
from evalflow.output.table import COLUMNS as RESULT_COLUMNS
from evalflow.output.table import results_rows

MAX_DOCS = 200  # per task in the per-document view; the page says when documents were left out
SWEEP_ORDER = ("num_fewshot", "limit", "seed", "model", "apply_chat_template", "gen_kwargs")


def expand(folders: Sequence[Path]) -> list[Run]:
    """Runs from folders; a multirun folder (numbered job folders) gives each of its jobs."""
    runs = []
    for folder in map(Path, folders):
        jobs = _sweep_jobs(folder)
        if jobs:
            runs.extend(load_run(job) for job in jobs)
        else:
            runs.append(load_run(folder))
    return runs


def _sweep_jobs(folder: Path) -> list[Path]:
    if not folder.is_dir() or (folder / "results.json").is_file():
        return []
    jobs = [p for p in folder.iterdir() if p.is_dir() and (p / "results.json").is_file()]
    return sorted(jobs, key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0, p.name))


def run_settings(run: Run) -> dict[str, Any]:
    """What a run was asked for: its Hydra overrides when recorded, else lm-eval's config block."""
    overrides = run.folder / ".hydra" / "overrides.yaml"
    if overrides.is_file():
        items = yaml.safe_load(overrides.read_text()) or []
        return dict(str(o).lstrip("+~").split("=", 1) for o in items if "=" in str(o))
    config = run.results.get("config", {})
    return {k: json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v for k, v in config.items()}


def varying_setting(runs: Sequence[Run]) -> tuple[str | None, list[Any]]:
    """The setting that differs between evalflow runs (sweep order first), and its value per run.
    Runs of lm-eval record their settings differently, so a mix is not read as a sweep."""
    if len(runs) < 2 or any(r.kind != "evalflow" for r in runs):
        return None, []
    settings = [run_settings(r) for r in runs]
    keys = [k for k in dict.fromkeys(k for s in settings for k in s) if len({str(s.get(k)) for s in settings}) > 1]
    keys = [k for k in keys if k not in ("hydra.run.dir", "hydra.sweep.dir", "cache_dir", "batch_size")]
    if not keys:
        return None, []
    key = min(keys, key=lambda k: (SWEEP_ORDER.index(k) if k in SWEEP_ORDER else len(SWEEP_ORDER), k))
    return key, [_number(s.get(key)) for s in settings]


def _number(value: Any) -> Any:
    try:
        return float(value) if "." in str(value) else int(value)
    except (TypeError, ValueError):
        return value


def metric_rows(runs: Sequence[Run], labels: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for run, label in zip(runs, labels):
        for name, entry in run.results.get("results", {}).items():
            for metric, filt in metric_keys(entry):
                value = float(entry[f"{metric},{filt}"])
                stderr = entry.get(f"{metric}_stderr,{filt}")
                err = float(stderr) if isinstance(stderr, (int, float)) else 0.0
                rows.append({"run": label, "task": str(entry.get("alias", name)).strip(), "metric": f"{metric},{filt}",
                             "value": value, "low": value - err, "high": value + err})
    return rows


def charts(runs: Sequence[Run], labels: Sequence[str], setting: str | None, values: Sequence[Any],
           comparison: Sequence[Comparison]) -> list[tuple[str, dict[str, Any]]]:
    """(title, Vega-Lite spec) of each chart, built with altair."""
    import altair as alt

    rows = metric_rows(runs, labels)
    out = []
    if rows:
        data = alt.Data(values=rows)
        bars = alt.Chart().mark_bar().encode(
            x=alt.X("task:N", title=None), xOffset="run:N", y=alt.Y("value:Q", title="value"),
            color=alt.Color("run:N"), tooltip=["run:N", "task:N", "metric:N", "value:Q", "low:Q", "high:Q"])
        errors = alt.Chart().mark_errorbar(ticks=True).encode(
            x="task:N", xOffset="run:N", y=alt.Y("low:Q", title="value"), y2="high:Q")
        chart = alt.layer(bars, errors, data=data).facet(row=alt.Row("metric:N", title=None)).resolve_scale(y="independent")
        out.append(("Each metric with its stderr, across runs", chart.to_dict()))
    if setting is not None:
        by_label = dict(zip(labels, values))
        line_rows = [{**r, setting: by_label[r["run"]], "series": f"{r['task']} {r['metric']}"} for r in rows]
        kind = "Q" if all(isinstance(v, (int, float)) for v in values) else "O"
        line = alt.Chart(alt.Data(values=line_rows)).mark_line(point=True).encode(
            x=alt.X(f"{setting}:{kind}", title=setting), y=alt.Y("value:Q"), color=alt.Color("series:N"),
            tooltip=["series:N", f"{setting}:{kind}", "value:Q"])
        out.append((f"Metrics along the sweep of {setting}", line.to_dict()))
    if comparison:
        diff_rows = [{"row": f"{c.task} {c.metric},{c.filter}", "diff": c.diff, "low": c.low, "high": c.high,
                      "p": c.p_value} for c in comparison if c.low is not None]
        if diff_rows:
            base = alt.Chart(alt.Data(values=diff_rows))
            points = base.mark_point(filled=True).encode(x=alt.X("diff:Q", title=f"{labels[1]} − {labels[0]}"),
                                                         y=alt.Y("row:N", title=None), tooltip=["row:N", "diff:Q", "p:Q"])
            rules = base.mark_rule().encode(x="low:Q", x2="high:Q", y="row:N")
            out.append(("Paired differences with 95% intervals", alt.layer(rules, points).to_dict()))
    return out


def document_view(runs: Sequence[Run], labels: Sequence[str]) -> list[dict[str, Any]]:
    """Per task: each document's prompt, target, and per run its answers, filtered answer, scores."""
    tasks = [t for t in runs[0].tasks() if all(t in r.samples_files for r in runs)]
    views = []
    for task in tasks:
        per_run = [{int(r["doc_id"]): r for r in run.rows(task) if str(r.get("filter")) == run.filters(task)[0]}
                   for run in runs]
        doc_ids = sorted(set.intersection(*(set(p) for p in per_run)))
        docs = []
        for doc_id in doc_ids[:MAX_DOCS]:
            rows = [p[doc_id] for p in per_run]
            scores = [{m: r.get(m) for m in r.get("metrics", [])} for r in rows]
            args = list(rows[0].get("arguments", {}).values())
            docs.append({
                "doc_id": doc_id, "prompt": str(args[0].get("arg_0", "")) if args else "",
                "target": str(rows[0].get("target", "")),
                "runs": [{"label": lb, "resps": _short(r.get("resps")), "filtered": _short(r.get("filtered_resps")),
                          "scores": ", ".join(f"{k}={_fmt(v)}" for k, v in s.items())}
                         for lb, r, s in zip(labels, rows, scores)],
                "disagree": len(runs) > 1 and any(s != scores[0] for s in scores[1:]),
            })
        views.append({"task": task, "docs": docs, "left_out": max(0, len(doc_ids) - MAX_DOCS),
                      "filter": runs[0].filters(task)[0]})
    return views


def _short(value: Any, limit: int = 400) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "…"


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def build_report(folders: Sequence[Path]) -> str:
    """The HTML page for these run folders."""
    try:
        import altair  # noqa: F401 - the charts' specs
        import vl_convert
    except ImportError:
        raise ConfigError('report needs the insight extra (altair, vl-convert): pip install "evalflow[insight]"') from None
    runs = expand(folders)
    setting, values = varying_setting(runs)
    labels = _labels(runs, setting, values)
    comparison: list[Comparison] = []
    compare_error = ""
    if len(runs) == 2:
        try:
            comparison = compare(runs[0], runs[1])
        except RunFolderError as exc:
            compare_error = str(exc)
    specs = charts(runs, labels, setting, values, comparison)
    import altair as alt

    bundle = vl_convert.javascript_bundle(vl_version=alt.SCHEMA_VERSION.lstrip("v").rsplit(".", 1)[0])
    return PAGE.render(
        runs=[{"label": lb, "folder": str(r.folder), "kind": r.kind, "rows": results_rows(r.results)}
              for lb, r in zip(labels, runs)],
        result_columns=RESULT_COLUMNS, compare_columns=COMPARE_COLUMNS,
        comparison=as_table_rows(comparison), compare_error=compare_error, labels=labels,
        charts=[{"id": f"chart{i}", "title": t, "spec": _script_json(s)} for i, (t, s) in enumerate(specs)],
        documents=document_view(runs, labels) if all(r.samples_files for r in runs) else [],
        bundle=bundle.replace("</script", "<\\/script"),
    )


def _labels(runs: Sequence[Run], setting: str | None, values: Sequence[Any]) -> list[str]:
    if setting is not None and len({str(v) for v in values}) == len(runs):
        return [f"{setting}={v}" for v in values]
    names = [r.label for r in runs]
    if len(set(names)) < len(names):
        names = [f"{r.folder.parent.name}/{r.label}" for r in runs]
    return [f"{i + 1}: {n}" if names.count(n) > 1 else n for i, n in enumerate(names)]


def _script_json(spec: Mapping[str, Any]) -> str:
    """JSON safe inside a <script> element (no "</" can close it)."""
    return json.dumps(spec).replace("</", "<\\/")


def main(argv: list[str]) -> int:
    """``report RUN... [out=report.html]``."""
    if not argv or any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0 if argv else 2
    words = parse_words(argv, Usage("report", "RUN...", {"out": str}, min_positional=1))
    out = Path(words.options.get("out", "report.html"))
    html = build_report([Path(a) for a in words.positional])
    from evalflow.output.run_folder import atomic_write

    atomic_write(out, [html])
    print(f"report: {out} ({len(html) // 1024} KiB)")
    return 0
