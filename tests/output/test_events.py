"""A run's events file (evalflow/output/events.py): what is written, when, and at what rate."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from evalflow.output.events import BEAT_SECONDS, MIN_INTERVAL, EventsWriter, first_line, recorded
from evalflow.output.run_paths import events_file
from evalflow.scale.progress import progress_label, report_progress


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Beats:
    """The heartbeat, driven by the test: its tick is called when the test says so."""

    def __init__(self) -> None:
        self.ticks: list[Callable[[], None]] = []
        self.stopped = 0

    def __call__(self, tick: Callable[[], None], period: float) -> Beats:
        self.ticks.append(tick)
        return self

    def stop(self) -> None:
        self.stopped += 1


def lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def progress(stream: io.StringIO) -> list[tuple[int, int]]:
    return [(e["done"], e["total"]) for e in lines(stream) if e["event"] == "progress"]


def test_a_label_gets_a_line_at_most_every_interval_and_never_loses_its_last_report() -> None:
    stream, clock, beats = io.StringIO(), Clock(), Beats()
    writer = EventsWriter(stream, clock=clock, timer=beats)
    writer.progress("inference t", 0, 100)  # a list's start: written
    writer.progress("inference t", 4, 100)  # its first answers (the rate is known): written at once
    for done in (8, 12, 16):  # within the interval: held back, the latest kept
        clock.now += 0.1
        writer.progress("inference t", done, 100)
    assert progress(stream) == [(0, 100), (4, 100)]
    beats.ticks[0]()  # the heartbeat before the interval is up: nothing yet
    assert progress(stream) == [(0, 100), (4, 100)]
    clock.now += MIN_INTERVAL
    beats.ticks[0]()  # due: the held report, though no chunk came since
    assert progress(stream) == [(0, 100), (4, 100), (16, 100)]
    clock.now += 0.01
    writer.progress("inference t", 100, 100)  # the last: at once, however soon
    writer.progress("inference u", 0, 7)  # another label has its own interval
    assert progress(stream) == [(0, 100), (4, 100), (16, 100), (100, 100), (0, 7)]
    assert [e["label"] for e in lines(stream)][-1] == "inference u"


def test_end_writes_held_reports_first_and_a_failure_with_its_first_line() -> None:
    stream, clock, beats = io.StringIO(), Clock(), Beats()
    writer = EventsWriter(stream, clock=clock, timer=beats)
    writer.start(["t"], "dummy")
    for done in (0, 4, 8):
        writer.progress("inference t", done, 40)
    writer.end(RuntimeError("the server went away\nTraceback ..."))
    events = lines(stream)
    assert [e["event"] for e in events] == ["start", "progress", "progress", "progress", "end"]
    assert events[-2]["done"] == 8 and beats.stopped == 1
    assert events[-1] == {
        "event": "end",
        "time": 1000.0,
        "status": "failed",
        "error": "RuntimeError: the server went away",
    }
    start = events[0]
    assert start["tasks"] == ["t"] and start["model"] == "dummy" and isinstance(start["pid"], int) and start["host"]
    writer.progress("inference t", 12, 40)  # after the end: nothing
    writer.end()  # a failed end stays the last
    assert len(lines(stream)) == 5


def test_first_line_names_the_type_of_an_error_without_text() -> None:
    assert first_line(KeyboardInterrupt()) == "KeyboardInterrupt"


def test_recorded_installs_the_sink_at_the_edge_and_ends_complete_or_failed(tmp_path: Path) -> None:
    with recorded(tmp_path / "ok", ["t"], "dummy") as writer:
        assert writer is not None
        with progress_label("inference t"):
            report_progress(0, 3)  # what the inference edge calls
            report_progress(3, 3)
    events = [json.loads(line) for line in events_file(tmp_path / "ok").read_text().splitlines()]
    assert [(e["event"], e.get("label"), e.get("done")) for e in events] == [
        ("start", None, None),
        ("progress", "inference t", 0),
        ("progress", "inference t", 3),
        ("end", None, None),
    ]
    assert events[-1]["status"] == "complete"
    report_progress(1, 3)  # outside the block: no sink, nothing written anywhere
    assert len(events_file(tmp_path / "ok").read_text().splitlines()) == 4

    with pytest.raises(ValueError), recorded(tmp_path / "bad", ["t"], "dummy"):
        raise ValueError("bad input")
    last = json.loads(events_file(tmp_path / "bad").read_text().splitlines()[-1])
    assert last["status"] == "failed" and last["error"] == "ValueError: bad input"

    with recorded(None, ["t"], "dummy") as nothing:  # no run folder: nothing written
        assert nothing is None
        report_progress(1, 3)


class FullDisk(io.StringIO):
    def write(self, text: str) -> int:
        raise OSError(28, "No space left on device")


def test_a_file_that_cannot_be_written_never_stops_the_run(caplog: pytest.LogCaptureFixture) -> None:
    writer = EventsWriter(FullDisk(), clock=Clock(), timer=Beats())
    with caplog.at_level("WARNING", logger="evalflow.output.events"):
        writer.start(["t"], "dummy")
        writer.progress("inference t", 0, 4)
        writer.end()
    assert writer.broken and len([r for r in caplog.records if "No space left" in r.getMessage()]) == 1


def test_a_quiet_run_writes_a_beat_line_so_that_another_host_sees_it_alive() -> None:
    stream, clock, beats = io.StringIO(), Clock(), Beats()
    writer = EventsWriter(stream, clock=clock, timer=beats)
    writer.start(["t"], "dummy")  # the heartbeat starts with the run
    clock.now += BEAT_SECONDS - 1
    beats.ticks[0]()
    assert [e["event"] for e in lines(stream)] == ["start"]
    clock.now += 1  # a minute without a line: a chunk taking its time
    beats.ticks[0]()
    beats.ticks[0]()  # the beat is a line: the next is due a minute later
    assert lines(stream)[-1] == {"event": "beat", "time": 1000.0 + BEAT_SECONDS}
    assert [e["event"] for e in lines(stream)] == ["start", "beat"]
