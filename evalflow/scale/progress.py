"""The inference edge's default progress report: requests answered so far, with the rate and ETA
(a rich bar on a terminal; else log lines: one when a list of requests starts, one every
``LOG_EVERY`` s from a heartbeat thread, however long a chunk takes, and one at its end).

Off a terminal (CI, nohup, a notebook) a chunk can take many minutes, so the log must not wait for
chunks to say the run is alive. Each line is labelled with what is being answered (the stage and
task, ``inference gsm8k``, ``judge_inference mt_bench``, or the tasks of a pooled list), set by
the scheduler with :func:`progress_label`.

A run that writes a run folder also records the same progress there, as it goes (the run folder's
events file, read by ``evalflow view``): that writer lives in a room above this one, so the run
installs it here as a plain callback, a :func:`progress_sink`, which the edge calls with the label,
requests done and total of each list of misses (:func:`report_progress`); nothing here knows files.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, Protocol

log = logging.getLogger("evalflow.scale.answer_cache")  # the edge's logger: its lines keep their name

LOG_EVERY = 30.0  # seconds between log lines off a terminal
HEARTBEAT_PERIOD = 1.0  # how often the heartbeat looks whether a line is due: lines come every 30-31 s

_label: ContextVar[str] = ContextVar("evalflow_progress_label", default="inference")

ProgressSink = Callable[[str, int, int], None]  # (label, done, total)
_sink: ContextVar[ProgressSink | None] = ContextVar("evalflow_progress_sink", default=None)


@contextlib.contextmanager
def progress_sink(sink: ProgressSink | None) -> Iterator[None]:
    """Send the progress of the model calls made inside the block to ``sink`` too (a run folder's
    events file); None: none (a run without a folder)."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


def report_progress(done: int, total: int) -> None:
    """Tell the installed sink, if any, that the current list has ``done`` of ``total`` requests answered."""
    sink = _sink.get()
    if sink is not None:
        sink(_label.get(), done, total)


@contextlib.contextmanager
def progress_label(label: str) -> Iterator[None]:
    """Label the progress lines of the model calls made inside the block (``inference gsm8k``)."""
    token = _label.set(label)
    try:
        yield
    finally:
        _label.reset(token)


def pooled_label(stage: str, tasks: list[str], shown: int = 3) -> str:
    """The label of one list pooling several tasks' requests: the first few tasks by name.

    >>> pooled_label("inference", ["a", "b", "c", "d", "e"])
    'inference a, b, c and 2 more'
    """
    more = f" and {len(tasks) - shown} more" if len(tasks) > shown else ""
    return f"{stage} {', '.join(tasks[:shown])}{more}"


def _significant(value: float) -> str:
    """Three significant digits, without an exponent or trailing zeros (``52.5``, ``1260``, ``0.3``)."""
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def rate_text(n: int, seconds: float) -> str:
    """``n`` requests in ``seconds`` as requests/s, or s/request when under one a second, with
    three significant digits: a slow model's 24 requests in 21 min are ``52.5 s/request``, where a
    one-decimal requests/s said ``0.0``.

    >>> rate_text(64, 2.0), rate_text(24, 1260.0), rate_text(3, 11.1), rate_text(0, 5.0)
    ('32 requests/s', '52.5 s/request', '3.7 s/request', 'no rate yet')
    """
    if n <= 0 or seconds <= 0:
        return "no rate yet"
    rate = n / seconds
    return f"{_significant(rate)} requests/s" if rate >= 1 else f"{_significant(1 / rate)} s/request"


def duration_text(seconds: float) -> str:
    """A duration in whole seconds as a person reads it.

    >>> duration_text(42.4), duration_text(250), duration_text(7260), duration_text(0.2)
    ('42 s', '4 min 10 s', '2 h 1 min', '0 s')
    """
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


class Beat(Protocol):
    def stop(self) -> None: ...


Timer = Callable[[Callable[[], None], float], Beat]  # (tick, period) -> something to stop


class Heartbeat:
    """Calls ``tick`` every ``period`` s on a daemon thread until stopped. ``stop`` does not wait
    for the thread (a tick may be waiting for the lock its caller holds); the thread ends at its
    next wake-up."""

    def __init__(self, tick: Callable[[], None], period: float) -> None:
        self._stopped = threading.Event()
        threading.Thread(target=self._run, args=(tick, period), name="evalflow-progress", daemon=True).start()

    def _run(self, tick: Callable[[], None], period: float) -> None:
        while not self._stopped.wait(period):
            tick()

    def stop(self) -> None:
        self._stopped.set()


class RequestProgress:
    """The default ``on_chunk``: the model's progress through the run's misses, with the rate and
    ETA, as a rich progress bar on a terminal, else log lines (see the module's docstring).

    One instance serves the whole run: the edge reports each list of misses (one per task and
    request type) as ``(0, total, 0.0)`` when it starts and ``(done, total, seconds)`` per chunk;
    the rate carries on from one list to the next instead of starting again. ``seconds`` is how
    long the reported chunk took on its replica (model loading excluded): the rate counts from when
    the run's first chunk *started*, so it shows from the first answered chunk, even when every
    request fits in one chunk. With several replicas the driver reports every chunk here, so the
    rate and ETA are those of all workers together. The ETA covers the current list.
    ``clock`` and ``timer`` are injectable so that tests drive the heartbeat themselves.
    """

    def __init__(
        self,
        log_every: float = LOG_EVERY,
        stream: Any = None,
        clock: Callable[[], float] = time.monotonic,
        timer: Timer = Heartbeat,
    ) -> None:
        import sys

        self.log_every, self.stream = log_every, stream or sys.stderr
        self.clock, self.timer = clock, timer
        self.total, self.done = 0, 0  # the current list of misses
        self.earlier_done = self.earlier_total = 0  # the lists before it
        self.label = "inference"  # what the current list answers
        self.began = 0.0  # when the current list started
        self.start: float | None = None  # when the run's first chunk started
        self.uncounted = 0  # requests answered before `start` (a first chunk without a duration)
        self.logged: float | None = None  # when the last line was logged
        self.bar: Any = None
        self.beat: Beat | None = None
        self.lock = threading.Lock()  # the heartbeat thread reads what chunks write

    @property
    def run_done(self) -> int:
        return self.earlier_done + self.done

    @property
    def run_total(self) -> int:
        return self.earlier_total + self.total

    def __call__(self, done: int, total: int, seconds: float = 0.0) -> None:
        with self.lock:
            now = self.clock()
            starting = total != self.total or done < self.done or self.done >= self.total > 0
            if starting:  # a new list of requests
                self._close()
                self.earlier_done, self.earlier_total = self.run_done, self.run_total
                self.total, self.done, self.label, self.began = total, 0, _label.get(), now
            self.done = done
            if self.start is None and (done > 0 or seconds > 0):  # the run's first answered chunk
                self.start = now - seconds if seconds > 0 else now
                self.uncounted = 0 if seconds > 0 else self.run_done
            if self.logged is None:
                self.logged = now
            if self.bar is None and getattr(self.stream, "isatty", lambda: False)():
                self.bar = _rich_bar(self.stream, self)
            if self.bar is not None:
                self.bar.update(self.bar.task_ids[0], completed=self.run_done, total=self.run_total)
            elif (starting and done == 0) or now - self.logged >= self.log_every or done >= total:
                self._log(now)
            if self.bar is None and self.beat is None and done < total:
                self.beat = self.timer(self.tick, max(min(HEARTBEAT_PERIOD, self.log_every), 0.1))
            if done >= total:
                self._close()

    def tick(self) -> None:
        """The heartbeat: a line when one is due, even though no chunk has returned since."""
        with self.lock:
            now = self.clock()
            if self.beat is not None and self.logged is not None and now - self.logged >= self.log_every:
                self._log(now)

    def _log(self, now: float) -> None:
        log.info("%s", self.status(now))
        self.logged = now

    def rate(self, now: float) -> str:
        """The run's rate so far (``no rate yet`` before its first answered chunk)."""
        return rate_text(self.run_done - self.uncounted, now - self.start if self.start is not None else 0.0)

    def eta(self, now: float) -> str:
        """What the current list has left at the run's rate, or '' when unknown or nothing is left."""
        counted, left = self.run_done - self.uncounted, self.total - self.done
        if self.start is None or counted <= 0 or now <= self.start or left <= 0:
            return ""
        return duration_text(left * (now - self.start) / counted)

    def status(self, now: float) -> str:
        """One log line: ``inference gsm8k: 8/24 requests, 3.7 s/request, ETA 59 s``."""
        run = f" ({self.run_done}/{self.run_total} in the run)" if self.earlier_total else ""
        head = f"{self.label}: {self.done}/{self.total} requests{run}"
        if self.done == 0 and now <= self.began:
            return f"{head}, started"
        if self.start is None:
            return f"{head}, none answered yet after {duration_text(now - self.began)}"
        eta = self.eta(now)
        return f"{head}, {self.rate(now)}" + (f", ETA {eta}" if eta else "")

    def close(self) -> None:
        """Stop the bar and the heartbeat (the edge calls this when the run ends, or fails)."""
        with self.lock:
            self._close()

    def _close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
        if self.beat is not None:
            self.beat.stop()
            self.beat = None


def _rich_bar(stream: Any, progress: RequestProgress) -> Any:
    """A transient rich bar showing ``progress``'s own rate and ETA (rich's estimate needs updates
    seconds apart, so a run reporting whole chunks would read 0.0 req/s until its end)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn
    from rich.text import Text

    class RateAndEta(ProgressColumn):
        def render(self, task: Any) -> Text:
            now = progress.clock()
            rate, eta = progress.rate(now), progress.eta(now)
            text = "" if progress.start is None else rate + (f", ETA {eta}" if eta else "")
            return Text(text.replace("requests/s", "req/s").replace("s/request", "s/req"))

    bar = Progress(
        TextColumn("inference"),
        BarColumn(),
        MofNCompleteColumn(),
        RateAndEta(),
        console=Console(file=stream),
        transient=True,
    )
    bar.add_task("requests", total=progress.run_total, completed=progress.run_done)
    bar.start()
    return bar
