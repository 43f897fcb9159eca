"""The inference edge's default progress report: requests answered so far over the whole run,
with requests/s and ETA (a rich bar on a terminal, else log lines)."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

log = logging.getLogger("evalflow.dag.inference")  # the edge's logger: its lines keep their name


class RequestProgress:
    """The default ``on_chunk``: the model's progress through the run's misses, with requests/s and
    ETA, as a rich progress bar on a terminal, else a log line at most every ``log_every`` s.

    One instance serves the whole run: the edge reports each list of misses (one per task and
    request type) as ``(done, total, seconds)``, and the counts add up over the lists, so the bar
    and the rate carry on from one task to the next instead of starting again at 0.0 requests/s.
    ``seconds`` is how long the reported chunk took on its replica (model loading excluded): the
    rate counts from when the run's first chunk *started*, so it shows from the first answered
    chunk, even when every request fits in one chunk. With several replicas the driver reports
    every chunk here, so the rate and ETA are those of all workers together. The ETA covers the
    requests known so far (the tasks still to come are not counted).
    """

    def __init__(self, log_every: float = 30.0, stream: Any = None, clock: Callable[[], float] = time.monotonic) -> None:
        import sys

        self.log_every, self.stream = log_every, stream or sys.stderr
        self.clock = clock  # a test passes its own, rather than patching time.monotonic for everyone
        self.total, self.done = 0, 0  # the current list of misses
        self.earlier_done = self.earlier_total = 0  # the lists before it
        self.start: float | None = None  # when the run's first chunk started
        self.uncounted = 0  # requests answered before `start` (a first chunk without a duration)
        self.logged = 0.0
        self.bar: Any = None

    @property
    def run_done(self) -> int:
        return self.earlier_done + self.done

    @property
    def run_total(self) -> int:
        return self.earlier_total + self.total

    def __call__(self, done: int, total: int, seconds: float = 0.0) -> None:
        now = self.clock()
        if total != self.total or done < self.done or self.done >= self.total > 0:  # a new list of requests
            self.close()
            self.earlier_done, self.earlier_total = self.run_done, self.run_total
            self.total, self.done = total, 0
        self.done = done
        if self.start is None:
            self.start = now - seconds if seconds > 0 else now
            self.uncounted = 0 if seconds > 0 else self.run_done
            self.logged = now
        if self.bar is None and getattr(self.stream, "isatty", lambda: False)():
            self.bar = _rich_bar(self.stream, self)
        if self.bar is not None:
            self.bar.update(self.bar.task_ids[0], completed=self.run_done, total=self.run_total)
        elif now - self.logged >= self.log_every or done >= total:
            log.info("inference: %s", self.status(now))
            self.logged = now
        if done >= total:
            self.close()

    def rate(self, now: float) -> float:
        if self.start is None or now <= self.start:
            return 0.0
        return (self.run_done - self.uncounted) / (now - self.start)

    def status(self, now: float) -> str:
        rate = self.rate(now)
        left = self.run_total - self.run_done
        eta = f", ETA {int(left / rate)} s" if rate > 0 and left > 0 else ""
        return f"{self.run_done}/{self.run_total} requests, {rate:.1f} requests/s{eta}"

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _rich_bar(stream: Any, progress: RequestProgress) -> Any:
    """A transient rich bar showing ``progress``'s own rate and ETA (rich's estimate needs updates
    seconds apart, so a run reporting whole chunks would read 0.0 req/s until its end)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn
    from rich.text import Text

    class RateAndEta(ProgressColumn):
        def render(self, task: Any) -> Text:
            rate_and_eta = progress.status(progress.clock()).split(" requests, ", 1)[-1]
            return Text(rate_and_eta.replace("requests/s", "req/s"))

    bar = Progress(TextColumn("inference"), BarColumn(), MofNCompleteColumn(), RateAndEta(),
                   console=Console(file=stream), transient=True)
    bar.add_task("requests", total=progress.run_total, completed=progress.run_done)
    bar.start()
    return bar
