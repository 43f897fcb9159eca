"""A run's progress events: JSON lines appended to the run folder while the run goes, so that
``evalflow view`` (:mod:`evalflow.frames.status`) can tell a running run from a dead one and show
how far it has got, from another process, without the run's help.

Three kinds of line, each flushed as written (a reader never waits for the run to end)::

    {"event": "start", "time": 1765.., "pid": 4242, "pid_start": "912345", "host": "node1",
     "tasks": ["arc_easy"], "model": "smollm2"}
    {"event": "progress", "time": 1765.., "label": "inference arc_easy", "done": 128, "total": 2376}
    {"event": "end", "time": 1765.., "status": "complete"}            (or "failed", "error": "<first line>")

and ``{"event": "beat", "time": ...}`` after ``BEAT_SECONDS`` without a line (a chunk that takes
minutes, a long scoring stage), so that a reader on another host, which cannot look at the pid,
still tells a quiet run from a dead one.

``progress`` lines come from the inference edge's own progress reports (``label`` as its log lines
name the list: :func:`evalflow.scale.progress.progress_label`), installed there by the run as a
callback (:func:`evalflow.scale.progress.progress_sink`): the stages never see it. A model that
answers hundreds of requests a second must not write hundreds of lines, so a label gets at most one
line every ``MIN_INTERVAL`` s, but never loses its state: a list's start (done 0), its first
answered requests (the rate becomes known) and its end are written at once, and a report held back
is written by a heartbeat thread when its interval is up, however long the next chunk takes.
The ``end`` line is written just before results.json (which stays the run folder's last file); a
run killed outright writes none, which the reader tells from the ``pid`` being gone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from evalflow.output.run_paths import events_file
from evalflow.scale.progress import Beat, Heartbeat, progress_sink

log = logging.getLogger(__name__)

MIN_INTERVAL = 0.5  # seconds between two progress lines of one label (its first answered and last excepted)
FLUSH_PERIOD = 0.25  # how often the heartbeat writes a held-back report whose interval is up
BEAT_SECONDS = 60.0  # a silent run (a long chunk, a long stage) writes a beat line this often


def process_start(pid: int) -> str | None:
    """When process ``pid`` started, as the kernel counts it (``/proc/<pid>/stat``'s starttime), or
    None where there is no /proc or no such process: with the pid it names one process, so a pid
    reused by a later process is not taken for the run's."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces
    return fields[19] if len(fields) > 19 else None


def first_line(error: BaseException) -> str:
    """What an ``end`` line says of the error that ended a run: its type and first line."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


class EventsWriter:
    """Appends a run's events to its events file, one flushed line each, from any thread.
    ``clock`` (the events' times) and ``timer`` (the heartbeat) are injectable for tests."""

    def __init__(
        self,
        stream: TextIO,
        clock: Callable[[], float] = time.time,
        timer: Callable[[Callable[[], None], float], Beat] = Heartbeat,
    ) -> None:
        self.stream, self.clock, self.timer = stream, clock, timer
        self.lock = threading.Lock()
        self.written: dict[str, tuple[float, int, int]] = {}  # label -> (time, done, total) of its last line
        self.held: dict[str, tuple[int, int]] = {}  # label -> (done, total) not written yet
        self.beat: Beat | None = None
        self.ended: str | None = None
        self.broken = False  # a write failed: no more lines
        self.last_line: float | None = None  # when the last line was written

    @classmethod
    def create(cls, folder: Path, **options: Any) -> EventsWriter:
        """A new events file in ``folder`` (an earlier failed attempt's, if any, replaced)."""
        folder.mkdir(parents=True, exist_ok=True)
        return cls(open(events_file(folder), "w", encoding="utf-8"), **options)  # closed by close()

    def start(self, tasks: Sequence[str], model: str) -> None:
        pid = os.getpid()
        process = {"pid": pid, "pid_start": process_start(pid), "host": socket.gethostname()}
        with self.lock:
            self._write({"event": "start", **process, "tasks": list(tasks), "model": model})
            self._beating()

    def progress(self, label: str, done: int, total: int) -> None:
        """The edge's report for one list of requests (the sink :func:`recorded` installs)."""
        with self.lock:
            if self.ended is not None:
                return
            last = self.written.get(label)
            now = self.clock()
            due = last is None or total != last[2] or done <= last[1] or done >= total
            if due or last is None or last[1] == 0 or now - last[0] >= MIN_INTERVAL:
                self.held.pop(label, None)
                self._progress(label, done, total, now)
            else:
                self.held[label] = (done, total)
                self._beating()

    def _beating(self) -> None:
        if self.beat is None:
            self.beat = self.timer(self.flush_due, FLUSH_PERIOD)

    def flush_due(self) -> None:
        """The heartbeat: each held-back report whose label's interval is up, written; a beat
        line when nothing was written for ``BEAT_SECONDS``."""
        with self.lock:
            if self.ended is not None or self.stream.closed:
                return
            now = self.clock()
            for label, (done, total) in list(self.held.items()):
                if now - self.written[label][0] >= MIN_INTERVAL:
                    del self.held[label]
                    self._progress(label, done, total, now)
            if self.last_line is not None and now - self.last_line >= BEAT_SECONDS:
                self._write({"event": "beat"}, now)

    def end(self, error: BaseException | None = None) -> None:
        """The run's last line: complete, or failed with the error's first line. Held-back reports
        are written first. A failure after a complete end (results.json could not be written) is
        written too: the last end line is the one that holds."""
        status = "complete" if error is None else "failed"
        with self.lock:
            if self.ended == status or self.ended == "failed":
                return
            if self.beat is not None:
                self.beat.stop()
                self.beat = None
            for label, (done, total) in list(self.held.items()):
                self._progress(label, done, total, self.clock())
            self.held.clear()
            line: dict[str, Any] = {"event": "end", "status": status}
            if error is not None:
                line["error"] = first_line(error)
            self._write(line)
            self.ended = status

    def close(self) -> None:
        with self.lock:
            if self.beat is not None:
                self.beat.stop()
                self.beat = None
            self.stream.close()

    def _progress(self, label: str, done: int, total: int, now: float) -> None:
        self.written[label] = (now, done, total)
        self._write({"event": "progress", "label": label, "done": done, "total": total}, now)

    def _write(self, event: dict[str, Any], now: float | None = None) -> None:
        """One line, flushed. The file only reports on the run: a write that fails (a full disk)
        is logged once and the file left as it is, never the run stopped for it."""
        if self.broken:
            return
        self.last_line = self.clock() if now is None else now
        line = {"event": event["event"], "time": round(self.last_line, 3), **event}
        try:
            self.stream.write(json.dumps(line, ensure_ascii=False) + "\n")
            self.stream.flush()
        except (OSError, ValueError) as exc:
            self.broken = True
            log.warning("the run's events file could not be written (%s); the run goes on without it", exc)


@contextlib.contextmanager
def recorded(folder: Path | None, tasks: Sequence[str], model: str) -> Iterator[EventsWriter | None]:
    """The block's run recorded in ``folder``'s events file: the start now, the edge's progress
    while the block runs, and the end: failed with the error that leaves the block, else complete
    (unless the block wrote it already, just before results.json). No folder: nothing is written."""
    if folder is None:
        with progress_sink(None):  # nor into an enclosing run's file
            yield None
        return
    writer = EventsWriter.create(folder)
    try:
        writer.start(tasks, model)
        with progress_sink(writer.progress):
            yield writer
    except BaseException as exc:
        writer.end(exc)
        raise
    else:
        writer.end()
    finally:
        writer.close()
