"""Issue 38, item 4: a long run off a terminal logs where it is. A start line when a list of
requests starts, a labelled line (stage and task) every LOG_EVERY s from a heartbeat however long
a chunk takes, and rates with enough digits to be true (24 requests in 21 min printed "0.0
requests/s"). The heartbeat is driven here by the test, through an injected clock and timer."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from evalflow.scale.progress import LOG_EVERY, RequestProgress, duration_text, progress_label, rate_text
from tests.support.judged import Judged
from tests.support.scale_runs import run_once

ROOT = Path(__file__).resolve().parents[2]


class ManualTimer:
    """A heartbeat the test fires itself: ``fire()`` is one wake-up of the thread."""

    def __init__(self) -> None:
        self.ticks: list[Callable[[], None]] = []
        self.stopped = 0

    def __call__(self, tick: Callable[[], None], period: float) -> ManualTimer:
        self.ticks.append(tick)
        return self

    def stop(self) -> None:
        self.stopped += 1

    def fire(self) -> None:
        for tick in self.ticks:
            tick()


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "evalflow.scale.answer_cache"]


@pytest.mark.parametrize(
    "n, seconds, text",
    [
        (24, 1260.0, "52.5 s/request"),  # the gsm8k_maj8 run: it printed 0.0 requests/s
        (3, 11.1, "3.7 s/request"),
        (1, 1.0, "1 requests/s"),
        (10, 37.0, "3.7 s/request"),
        (8, 30.0, "3.75 s/request"),
        (27, 100.0, "3.7 s/request"),
        (64, 2.0, "32 requests/s"),
        (192, 21.0, "9.14 requests/s"),
        (5000, 3.0, "1667 requests/s"),
        (1, 3600.0, "3600 s/request"),
        (0, 30.0, "no rate yet"),
        (5, 0.0, "no rate yet"),
    ],
)
def test_rate_text_reads_true_at_any_speed(n: int, seconds: float, text: str) -> None:
    assert rate_text(n, seconds) == text
    assert rate_text(n, seconds) not in ("0.0 requests/s", "0 requests/s")


@pytest.mark.parametrize(
    "seconds, text",
    [
        (0.0, "0 s"),
        (0.4, "0 s"),
        (42.4, "42 s"),
        (59.6, "1 min 0 s"),
        (250.0, "4 min 10 s"),
        (3599.0, "59 min 59 s"),
        (3600.0, "1 h 0 min"),
        (7260.0, "2 h 1 min"),
        (-3.0, "0 s"),
    ],
)
def test_duration_text(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


def test_off_a_terminal_the_heartbeat_logs_every_log_every_seconds(caplog: pytest.LogCaptureFixture) -> None:
    now, timer = [1000.0], ManualTimer()
    progress = RequestProgress(stream=io.StringIO(), clock=lambda: now[0], timer=timer)
    with caplog.at_level(logging.INFO, logger="evalflow.scale.answer_cache"), progress_label("inference gsm8k_maj8"):
        progress(0, 24, 0.0)  # the edge's start call: before the model is even loaded
        assert len(timer.ticks) == 1
        now[0] += LOG_EVERY
        timer.fire()  # no chunk yet (the only one takes minutes): the line still comes
        now[0] += 10.0
        timer.fire()  # 10 s after the last line: not due
        now[0] += 10.0
        progress(8, 24, 50.0)  # a chunk of 8 that took 50 s (its start is the rate's start), not due either
        now[0] += 10.0
        timer.fire()
        now[0] += 1260.0 - 60.0
        progress(24, 24, 1200.0)
        timer.fire()  # the list is done and the heartbeat stopped: nothing more
    assert lines(caplog) == [
        "inference gsm8k_maj8: 0/24 requests, started",
        "inference gsm8k_maj8: 0/24 requests, none answered yet after 30 s",
        "inference gsm8k_maj8: 8/24 requests, 7.5 s/request, ETA 2 min 0 s",
        "inference gsm8k_maj8: 24/24 requests, 52.5 s/request",
    ]
    assert timer.stopped == 1


def test_a_failed_run_s_close_stops_the_heartbeat(caplog: pytest.LogCaptureFixture) -> None:
    now, timer = [0.0], ManualTimer()
    progress = RequestProgress(stream=io.StringIO(), clock=lambda: now[0], timer=timer)
    with caplog.at_level(logging.INFO, logger="evalflow.scale.answer_cache"):
        progress(0, 10, 0.0)
        progress.close()  # the edge's close, as when the model raised mid-list
        now[0] += 5 * LOG_EVERY
        timer.fire()
    assert lines(caplog) == ["inference: 0/10 requests, started"] and timer.stopped == 1


def test_on_a_terminal_the_bar_alone_reports(caplog: pytest.LogCaptureFixture) -> None:
    now, timer, stream = [0.0], ManualTimer(), Tty()
    progress = RequestProgress(stream=stream, clock=lambda: now[0], timer=timer)
    with caplog.at_level(logging.INFO, logger="evalflow.scale.answer_cache"):
        progress(0, 24, 0.0)
        now[0] += 5 * LOG_EVERY
        progress(8, 24, 60.0)
        progress.bar.refresh()
        progress(24, 24, 10.0)
    assert timer.ticks == [] and lines(caplog) == []  # no heartbeat, no log lines
    assert "8/24" in stream.getvalue() and "s/req" in stream.getvalue() and progress.bar is None


def test_the_run_s_lines_name_the_stage_and_its_task(
    toy_library: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="evalflow.scale.answer_cache"):
        run_once(toy_library, tmp_path / "cache", tmp_path / "one", task="toy_mc")
        run_once(toy_library, tmp_path / "cache2", tmp_path / "two", task=["toy_mc", "toy_gen"])
    logged = lines(caplog)
    assert "inference toy_mc: 0/160 requests, started" in logged  # one task: its inference stage
    assert any(line.startswith("inference toy_mc: 160/160 requests, ") for line in logged), logged
    pooled = [line for line in logged if line.startswith("inference toy_mc, toy_gen: ")]  # two tasks pooled
    assert pooled and pooled[0].endswith(" requests, started"), logged


def test_a_judge_s_lines_name_the_judge_stage_and_task(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="evalflow.scale.answer_cache"):
        Judged(tmp_path)()
    logged = lines(caplog)
    assert "judge_inference judged: 0/100 requests, started" in logged, logged
    assert any(line.startswith("judge_inference judged: 100/100 requests, ") for line in logged), logged


def test_a_command_line_run_off_a_terminal_logs_its_start(toy_library: Path, tmp_path: Path) -> None:
    """``python -m evalflow`` with stderr to a pipe (CI, nohup): the log says inference started."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evalflow",
            "model=dummy",
            "task=toy_mc",
            f"include_path=[{toy_library}]",
            f"cache_dir={tmp_path / 'cache'}",
            "bootstrap_iters=0",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "inference toy_mc: 0/160 requests, started" in done.stderr, done.stderr
    assert "inference toy_mc: 160/160 requests, " in done.stderr and " 0.0 requests/s" not in done.stderr
