"""A run folder's status and live progress (evalflow/frames/status.py), on real runs held in the
middle (tests/support/live_runs.py) and on the events files of runs that died."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from evalflow.frames.status import (
    STALE_SECONDS,
    STARTING_SECONDS,
    events_status,
    live_progress,
    read_events,
    run_status,
)
from evalflow.output.events import process_start
from evalflow.output.run_paths import events_file, lmeval_results_name, results_file, snapshot_config
from tests.support.live_runs import GATE_FAILURE, live_run


def write_events(folder: Path, *events: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(events_file(folder), "a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(e) + "\n" for e in events)


def start_line(pid: int, host: str, when: float, pid_start: str | None = None) -> dict:
    return {"event": "start", "time": when, "pid": pid, "pid_start": pid_start, "host": host, "tasks": ["t"]}


def test_a_run_is_running_with_its_progress_then_complete(tmp_path: Path) -> None:
    with live_run(tmp_path, limit=10, chunk_size=4) as run:
        run.wait_progress()  # the model holds its second call: one chunk of 4 answered
        assert run_status(run.folder, "evalflow") == "running"
        live = live_progress(run.folder)
        assert live is not None and live["status"] == "running" and live["error"] is None
        [(label, progress)] = live["tasks"].items()
        assert label == "inference toy_mc"
        assert progress["done"] == 4 and progress["total"] == 40  # 10 documents x 4 choices
        assert progress["rate"] is None or progress["rate"] > 0
        assert live["started"] is not None and datetime.fromisoformat(live["updated"]) >= datetime.fromisoformat(
            live["started"]
        )
        assert live["model"] == "evalflow_tests_gated" and live["pid"] == os.getpid()
        assert not results_file(run.folder).exists()
        run.release()
        results = run.wait_done()
    assert results["results"]["toy_mc"]["acc,none"] is not None
    assert run_status(run.folder, "evalflow") == "complete"
    done = live_progress(run.folder)
    assert done is not None and done["status"] == "complete"
    finished = done["tasks"]["inference toy_mc"]
    assert (finished["done"], finished["total"], finished["eta_s"]) == (40, 40, 0.0) and finished["rate"] > 0
    events = [json.loads(line) for line in events_file(run.folder).read_text().splitlines()]
    assert events[0]["event"] == "start" and events[-1] == {**events[-1], "event": "end", "status": "complete"}
    # the end line came before results.json, which stays the run folder's last file
    assert events[-1]["time"] <= results_file(run.folder).stat().st_mtime + 1e-3


def test_a_run_whose_model_fails_is_failed_with_its_error(tmp_path: Path) -> None:
    with live_run(tmp_path) as run:
        run.wait_progress()
        run.release(fail=True)
        try:
            run.wait_done()
        except Exception as exc:
            assert GATE_FAILURE in str(exc)
        else:
            raise AssertionError("the run did not fail")
    assert run_status(run.folder, "evalflow") == "failed"
    live = live_progress(run.folder)
    assert live is not None and live["status"] == "failed" and GATE_FAILURE in live["error"]
    assert live["tasks"]["inference toy_mc"]["done"] == 4


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(gone.stdout)


def test_a_run_killed_without_a_word_is_failed(tmp_path: Path) -> None:
    dead = dead_pid()
    host = os.uname().nodename
    write_events(tmp_path / "dead", start_line(dead, host, time.time()))
    assert run_status(tmp_path / "dead", "evalflow") == "failed"
    # this process's pid, but started at another time: a reused pid is not the run's process
    write_events(tmp_path / "reused", start_line(os.getpid(), host, time.time(), pid_start="1"))
    assert run_status(tmp_path / "reused", "evalflow") == "failed"
    write_events(tmp_path / "alive", start_line(os.getpid(), host, time.time(), process_start(os.getpid())))
    assert run_status(tmp_path / "alive", "evalflow") == "running"


def test_a_run_on_another_host_is_running_until_its_events_go_stale(tmp_path: Path) -> None:
    now = time.time()
    write_events(
        tmp_path,
        start_line(dead_pid(), "elsewhere", now - 30),
        {"event": "progress", "time": now - 5, "label": "x", "done": 1, "total": 2},
    )
    events = read_events(tmp_path)
    assert events is not None
    assert events_status(events, now, "here") == "running"
    assert events_status(events, now + STALE_SECONDS, "here") == "failed"
    assert events_status(events, now, "elsewhere") == "failed"  # on its own host its pid decides


def test_a_snapshot_without_events_or_results_is_failed_once_it_is_not_new(tmp_path: Path) -> None:
    config = snapshot_config(tmp_path)
    config.parent.mkdir(parents=True)
    config.write_text("task: t\n")
    assert run_status(tmp_path, "evalflow") == "running"  # a command-line run on its way to its start
    old = time.time() - STARTING_SECONDS - 1
    os.utime(config.parent, (old, old))
    assert run_status(tmp_path, "evalflow") == "failed"
    assert live_progress(tmp_path) is None
    assert run_status(tmp_path / "nothing", "evalflow") == "failed"


def test_results_say_complete_or_partial_in_either_layout(tmp_path: Path) -> None:
    complete, partial, lmeval = tmp_path / "complete", tmp_path / "partial", tmp_path / "lm"
    for folder in (complete, partial, lmeval):
        folder.mkdir()
    results_file(complete).write_text(json.dumps({"results": {}}))
    results_file(partial).write_text(json.dumps({"results": {}, "partial": {"t": {"n": 2, "N": 10}}}))
    (lmeval / lmeval_results_name("2026-12-06T10-00-00.000001")).write_text(json.dumps({"results": {}}))
    write_events(partial, {"event": "end", "time": 1.0, "status": "failed"})  # results outrank events
    assert run_status(complete, "evalflow") == "complete"
    assert run_status(partial, "evalflow") == "partial"
    assert run_status(lmeval, "lm-eval") == "complete"
    assert run_status(tmp_path, "lm-eval") == "failed"  # no results file there


def test_the_events_file_is_read_incrementally_and_a_half_line_waits(tmp_path: Path) -> None:
    now = time.time()
    write_events(
        tmp_path,
        start_line(os.getpid(), "h", now),
        {"event": "progress", "time": now, "label": "a", "done": 0, "total": 10},
    )
    first = read_events(tmp_path)
    assert first is not None and first.count == 2
    with open(events_file(tmp_path), "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"event": "progress", "time": now + 2, "label": "a", "done": 4, "total": 10}) + "\n")
        fh.write('{"event": "progress", "time": ')  # the writer is mid-line
    second = read_events(tmp_path)
    assert second is not None and second.count == 3 and second.lists["a"].done == 4
    assert second.lists["a"].rate() == 2.0 and second.lists["a"].eta_seconds() == 3.0
    with open(events_file(tmp_path), "a", encoding="utf-8") as fh:
        fh.write(f'{now + 4}, "label": "a", "done": 2, "total": 10}}\n')  # done went back: a new list
    third = read_events(tmp_path)
    assert third is not None and third.count == 4 and third.lists["a"].done == 2 and third.lists["a"].rate() is None
    fresh = tmp_path / "fresh"
    fresh.write_text(json.dumps(start_line(1, "h", now + 9)) + "\n")
    os.replace(fresh, events_file(tmp_path))  # a new run's file in its place: read from its start
    fourth = read_events(tmp_path)
    assert fourth is not None and fourth.count == 1 and not fourth.lists


def event_kinds(folder: Path) -> list[str]:
    return [json.loads(line)["event"] for line in events_file(folder).read_text().splitlines()]


def test_the_command_line_and_rescore_record_their_events_too(tmp_path: Path) -> None:
    """``python -m evalflow`` (Hydra's run folder) and ``rescore`` write the events file as
    ``evaluate()`` does; results.json is still the folder's last file."""
    from evalflow.run.rescoring import rescore
    from tests.support.cli import cli
    from tests.support.toy_tasks import write_toy_library

    library = write_toy_library(tmp_path)
    folder = tmp_path / "cli-run"
    args = ["model=dummy", "task=toy_mc", "limit=3", f"include_path=[{library}]", f"cache_dir={tmp_path / 'c'}"]
    done = cli([*args, "bootstrap_iters=0", f"hydra.run.dir={folder}"])
    assert done.returncode == 0, done.stderr
    assert event_kinds(folder) == ["start", "progress", "progress", "end"]  # 12 requests in one chunk
    assert run_status(folder, "evalflow") == "complete"
    assert events_file(folder).stat().st_mtime_ns <= results_file(folder).stat().st_mtime_ns

    out = tmp_path / "rescored"
    overrides = ["task=toy_mc", f"include_path=[{library}]", f"cache_dir={tmp_path / 'c'}", "bootstrap_iters=0"]
    rescore(sorted(folder.glob("samples_*.jsonl")), overrides, out)
    assert event_kinds(out) == ["start", "end"]  # no model: no progress
    assert run_status(out, "evalflow") == "complete"


def test_lines_the_run_did_not_write_are_skipped(tmp_path: Path) -> None:
    now = time.time()
    write_events(tmp_path, {"event": "start", "time": "noon", "pid": "x", "host": None})
    with open(events_file(tmp_path), "a", encoding="utf-8") as fh:
        fh.write("not json\n[1, 2]\n")
        fh.write(json.dumps({"event": "progress", "time": now, "label": ["a"], "done": "many"}) + "\n")
        fh.write(json.dumps({"event": "progress", "time": now, "label": "a", "done": 1, "total": 4}) + "\n")
    live = live_progress(tmp_path)
    assert live is not None and live["started"] is None and list(live["tasks"]) == ["a"]
    assert live["status"] == "running"  # no host of this one's name: its last event, a new one, decides
