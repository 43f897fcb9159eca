"""The side-environment worker's stderr: forwarded with a prefix, its last lines in the error when the
worker dies, and a reader thread that ends with the worker (no leak, no deadlock).

These tests start the worker on an environment with no pins (nothing to provision): what is
tested is the host side of the channel, which is the same for every environment. Each is driven
by the worker's exit (the host reads end of file), never by sleeping.
"""

from __future__ import annotations

import io
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalflow.taskspec.sidenv import worker as side_worker
from evalflow.taskspec.sidenv.envs import SideEnv
from evalflow.taskspec.sidenv.worker import SideEnvError, Worker

ENV = SideEnv(name="test-env", requirements=(), triggers=(), why="tests")

TASK_CODE = """\
import os, subprocess, sys

def noisy_death(doc):
    for i in range(5000):                     # ~400 KB: several times a pipe's buffer
        print(f"line {i} of task code output " + "x" * 50, file=sys.stderr)
    print("last line before exit", file=sys.stderr)
    sys.stderr.flush()
    os._exit(3)

def orphan_then_death(doc):
    # a child that inherits the worker's stderr and would hold the pipe open forever
    subprocess.Popen(["sleep", "1000"])
    print("spawned a child", file=sys.stderr, flush=True)
    os._exit(4)

def unencodable(doc):
    for i in range(3000):                     # more than a pipe's buffer, after a line the host cannot print
        print(f"caf\\u00e9 {i} " + "y" * 60, file=sys.stderr)
    sys.stderr.flush()
    return "answered"

def long_line(doc):
    sys.stderr.write("z" * 200_000 + "\\n")  # one line longer than the reader's chunk
    sys.stderr.flush()
    return len(doc)
"""


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[tuple[Worker, Any]]:
    path = tmp_path / "noisy.py"
    path.write_text(textwrap.dedent(TASK_CODE))
    started = Worker(ENV, tmp_path / "env")
    started.request(("load", str(path), "noisy", "noisy_death"), "the import of noisy.py")

    def call(attr: str, doc: Any = None) -> Any:
        return started.request(("call", "noisy", attr, (doc or {},), {}), f"`{attr}` of noisy.py")

    yield started, call
    started.stop()


def _assert_ended(worker: Worker) -> None:
    assert not worker._reader.is_alive()  # the reader thread ended with the worker
    assert all(s is not None and s.closed for s in (worker.proc.stdin, worker.proc.stdout, worker.proc.stderr))


def test_a_worker_dying_after_much_output_reports_its_last_lines_and_its_reader_ends(
    worker: tuple[Worker, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    started, call = worker
    with pytest.raises(SideEnvError) as caught:
        call("noisy_death")
    message = str(caught.value)
    assert (
        "'test-env' side-environment worker" in message
        and "exited with status 3 while running `noisy_death`" in message
    )
    assert message.index("line 4999 of task code output") < message.index("last line before exit")
    _assert_ended(started)
    forwarded = capsys.readouterr().err.splitlines()
    assert len(forwarded) == 5001  # every line reached this process's stderr, once
    assert all(line.startswith("[side env test-env] ") for line in forwarded)
    assert forwarded[-1] == "[side env test-env] last line before exit"


def test_a_child_left_holding_the_workers_stderr_does_not_keep_the_reader_alive(worker: tuple[Worker, Any]) -> None:
    started, call = worker
    with pytest.raises(SideEnvError, match=r"exited with status 4 .*spawned a child"):
        call("orphan_then_death")
    _assert_ended(started)


@pytest.mark.timeout(120)  # before the fix this call never returned: the worker blocked on a full stderr pipe
def test_a_line_this_process_cannot_print_does_not_stop_the_forwarding(
    worker: tuple[Worker, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    started, call = worker
    ascii_only = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict", write_through=True)
    monkeypatch.setattr(sys, "stderr", ascii_only)
    assert call("unencodable") == "answered"
    assert started._reader.is_alive() and call("long_line", {"a": 1}) == 1  # the same worker, still forwarding
    started.stop()
    _assert_ended(started)
    printed = ascii_only.buffer.getvalue().decode("ascii").splitlines()  # type: ignore[attr-defined]
    assert printed[0] == "[side env test-env] caf\\xe9 0 " + "y" * 60  # escaped, not dropped
    assert printed[-1] == "[side env test-env] " + "z" * 200_000  # one long line, one prefix


def test_stop_workers_ends_every_reader(worker: tuple[Worker, Any]) -> None:
    started, _ = worker
    side_worker._WORKERS[("test-env", "test")] = started
    side_worker.stop_workers()
    _assert_ended(started)
