"""A run folder's status, complete, partial, running or failed, and a running run's progress, read
from the files the run writes (:mod:`evalflow.output.events`), never from the run itself: the viewer
is another process, often started after the run.

- **complete**: results.json is there (lm-eval's layout: a ``results_<date>.json``);
- **partial**: it is, and marks the run partial (``subset=``: :mod:`evalflow.output.partial`);
- **running**: no results yet, and the events file has no failed end and its process is alive: on
  this host its pid is running and is the same process (its start time, so a reused pid is not
  taken for it); from another host, where no pid can be looked at, its last line (a quiet run
  writes a beat line every minute) is newer than ``STALE_SECONDS``;
- **failed**: no results, and the events file ends failed, or its process is gone (killed without
  a word), or there is no events file at all (a folder with a config snapshot and nothing else: a
  run that stopped before it started, or one of a version that wrote no events), once its snapshot
  is older than ``STARTING_SECONDS`` (before that it is a command-line run still importing its way
  to its first event, and counts as running).

The events file is read incrementally: each call reads only the lines appended since the last, so
the viewer's poll every second costs the new lines, not the whole file.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from evalflow.output.contained import inside, link_out
from evalflow.output.events import BEAT_SECONDS, process_start
from evalflow.output.partial import partial_tasks
from evalflow.output.run_paths import LMEVAL_RESULTS_GLOB, events_file, results_file, snapshot_dir

STALE_SECONDS = 3 * BEAT_SECONDS  # a run on another host with no line for this long (3 beats missed) is dead
STARTING_SECONDS = 60.0  # a snapshot without events younger than this: a run on its way to its start
FOLLOWED = 256  # events files whose reading position is kept (least recently read dropped)

COMPLETE, PARTIAL, RUNNING, FAILED = "complete", "partial", "running", "failed"


@dataclass(frozen=True)
class ListProgress:
    """One label's current list of requests: where it started (time, done) and where it is."""

    began: float
    done_at_start: int
    time: float
    done: int
    total: int

    def rate(self) -> float | None:
        """Requests a second since the list started, None before any was answered."""
        answered, seconds = self.done - self.done_at_start, self.time - self.began
        return answered / seconds if answered > 0 and seconds > 0 else None

    def eta_seconds(self) -> float | None:
        """Seconds the list has left at its rate: 0 when done, None while no rate is known."""
        if self.done >= self.total:
            return 0.0
        rate = self.rate()
        return (self.total - self.done) / rate if rate else None


@dataclass(frozen=True)
class Events:
    """What an events file says so far."""

    start: dict[str, Any] | None
    end: dict[str, Any] | None  # the last end line
    updated: float | None  # the last event's time
    count: int
    lists: dict[str, ListProgress] = field(default_factory=dict)  # label -> its current list


def folded(events: Events, lines: Iterable[dict[str, Any]]) -> Events:
    """``events`` with more lines; a progress line that goes back (done lower, another total)
    starts a new list of its label."""
    start, end, updated, count, lists = events.start, events.end, events.updated, events.count, dict(events.lists)
    for event in lines:
        try:
            kind, now = event.get("event"), float(event.get("time", 0.0))
            if kind == "progress":
                label, done, total = event["label"], int(event.get("done", 0)), int(event.get("total", 0))
        except (KeyError, TypeError, ValueError):  # not a line the run wrote: skipped
            continue
        if kind == "start":
            start = event
        elif kind == "end":
            end = event
        elif kind == "progress" and isinstance(label, str):
            last = lists.get(label)
            if last is None or done < last.done or total != last.total:
                lists[label] = ListProgress(now, done, now, done, total)
            else:
                lists[label] = ListProgress(last.began, last.done_at_start, now, done, total)
        updated, count = now, count + 1
    return Events(start, end, updated, count, lists)


class _Followed:
    """An events file's reading position and what its lines said up to there."""

    def __init__(self, identity: tuple[int, int]) -> None:
        self.identity, self.offset = identity, 0
        self.events = Events(None, None, None, 0)


_followed: OrderedDict[Path, _Followed] = OrderedDict()
_lock = threading.Lock()


def read_events(folder: Path) -> Events | None:
    """What ``folder``'s events file says (None: there is none), reading only the lines appended
    since the last call for it; a half-written last line waits for the next call."""
    path = events_file(folder)
    if link_out(folder, path):  # a link out of the run folder is no events file of it
        return None
    try:
        stat = path.stat()
    except OSError:
        return None
    identity = (stat.st_dev, stat.st_ino)
    with _lock:
        followed = _followed.pop(path, None)
        if followed is None or followed.identity != identity or stat.st_size < followed.offset:
            followed = _Followed(identity)  # new, or replaced by a new run's file
        _followed[path] = followed
        while len(_followed) > FOLLOWED:
            _followed.popitem(last=False)
        if stat.st_size > followed.offset:
            _read_new_lines(path, followed, stat.st_size)
        return followed.events


def _read_new_lines(path: Path, followed: _Followed, size: int) -> None:
    try:
        with open(path, "rb") as fh:
            fh.seek(followed.offset)
            data = fh.read(size - followed.offset)
    except OSError:
        return
    whole = data.rfind(b"\n") + 1
    followed.events = folded(followed.events, _parsed(data[:whole].splitlines()))
    followed.offset += whole


def _parsed(lines: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The lines that are JSON objects; any other line (not one the run wrote) is skipped, as a
    reader of a log would."""
    for line in lines:
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(event, dict):
            yield event


def run_status(entry_folder: Path, layout: str) -> str:
    """complete | partial | running | failed (see the module's docstring). ``layout``: "evalflow"
    (a run folder) or "lm-eval" (the folder holding lm-eval's results files, newest read, or one
    results file: lm-eval writes several runs into one folder)."""
    folder = Path(entry_folder)
    if layout == "lm-eval":
        found = (
            [folder]
            if folder.is_file()
            else sorted(
                (p for p in folder.glob(LMEVAL_RESULTS_GLOB) if inside(folder, p)), key=lambda p: p.stat().st_mtime_ns
            )
        )
        return _finished_status(found[-1]) if found else FAILED
    results = results_file(folder)
    if inside(folder, results):
        return _finished_status(results)
    events = read_events(folder)
    if events is None:
        return _starting_or_failed(folder, time.time())
    return events_status(events, time.time(), socket.gethostname())


def events_status(events: Events, now: float, host: str) -> str:
    """running or failed, for a run without results, from what its events file says."""
    if events.end is not None and events.end.get("status") == FAILED:
        return FAILED
    start = events.start
    if start is None:  # the file was just made: the start line is its first write
        return RUNNING if events.updated is None or now - events.updated < STALE_SECONDS else FAILED
    if start.get("host") == host and isinstance(start.get("pid"), int):
        return RUNNING if process_alive(start["pid"], start.get("pid_start")) else FAILED
    return RUNNING if events.updated is not None and now - events.updated < STALE_SECONDS else FAILED


def _starting_or_failed(folder: Path, now: float) -> str:
    """A folder with no results and no events: running while its snapshot is new, else failed."""
    try:
        written = snapshot_dir(folder).stat().st_mtime
    except OSError:
        return FAILED
    return RUNNING if now - written < STARTING_SECONDS else FAILED


def process_alive(pid: int, started: str | None) -> bool:
    """Whether ``pid`` runs and is the process that started at ``started`` (when known), not a
    later one given the same pid, nor a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    except OSError:
        return False
    now_started = process_start(pid)
    if started is not None and now_started is not None and now_started != started:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _finished_status(results: Path) -> str:
    stat = results.stat()
    return _marked_status(str(results), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=1024)
def _marked_status(path: str, mtime_ns: int, size: int) -> str:
    """complete or partial, read once per version of a results file (mtime and size name it)."""
    try:
        results = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return FAILED
    return PARTIAL if isinstance(results, dict) and partial_tasks(results) else COMPLETE


def _iso(seconds: Any) -> str | None:
    """An event's time as ISO 8601 (UTC); None for what is not a time."""
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return None


def live_progress(folder: Path) -> dict[str, Any] | None:
    """A run's progress from its events file, for the viewer's live page; None without one::

        {"status": "running", "started": ISO, "updated": ISO, "events": 12, "model": "dummy",
         "host": ..., "pid": ..., "error": None,
         "tasks": {"inference arc_easy": {"done": 128, "total": 2376, "rate": 31.5, "eta_s": 71.4}}}

    ``rate`` is requests a second since the list started (None before its first answers),
    ``eta_s`` the seconds it has left at that rate (0 once done, None while unknown).
    """
    events = read_events(Path(folder))
    if events is None:
        return None
    start, end = events.start or {}, events.end or {}
    tasks = {
        label: {
            "done": p.done,
            "total": p.total,
            "rate": None if p.rate() is None else round(p.rate() or 0.0, 3),
            "eta_s": None if p.eta_seconds() is None else round(p.eta_seconds() or 0.0, 1),
        }
        for label, p in events.lists.items()
    }
    return {
        "status": run_status(Path(folder), "evalflow"),
        "started": _iso(start.get("time")),
        "updated": _iso(events.updated),
        "tasks": tasks,
        "events": events.count,
        "model": start.get("model"),
        "host": start.get("host"),
        "pid": start.get("pid"),
        "error": end.get("error"),
    }
