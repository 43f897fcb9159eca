"""A model that holds a run inside a chosen model call until the test has acted, and the test's side.

A signal test (Ctrl-C, SIGKILL) must know that the run is *inside* inference when its signal
arrives, however loaded the machine is. Polling a fast model's call log and then signalling races
the run: on a busy machine the poll sees the threshold late and the run has finished; on an idle
one it may not have started. :class:`HeldModel` answers as the CountingModel does (same identity:
runs of either share cached answers) but, at its N-th call in a process, reports ``held N`` on a
pipe and blocks until the test releases it (writes to, or closes, a second pipe). The test signals
only after it has read ``held N``: calls 1..N-1 are answered and persisted, call N is in the model,
and nothing after it has started, whatever the timing.

    hold = Hold(at=3)
    proc = subprocess.Popen([sys.executable, "-m", "evalflow", f"model.type={HELD}", ...],
                            env={**os.environ, **hold.env}, pass_fds=hold.child_fds)
    hold.started()
    hold.wait_held()                  # the run is blocked in its 3rd model call
    proc.send_signal(signal.SIGINT)   # certain to land mid-inference

Without ``EVALFLOW_TEST_HOLD`` in its environment the model never holds, so "the same command
again" (a resume) runs straight through.
"""

from __future__ import annotations

import os
import select
import signal
from collections.abc import Sequence

from evalflow.core.records import Request
from tests.support.models import CountingModel

HELD = "tests.support.hold:HeldModel"
HOLD_ENV = "EVALFLOW_TEST_HOLD"  # "N:EVENT_FD:RELEASE_FD"
HOLD_LIMIT = 300.0  # seconds a held call waits before it fails the run (a test that never released it)


class HeldModel(CountingModel):
    """The CountingModel, holding its ``N``-th call (any request type) as ``EVALFLOW_TEST_HOLD`` says."""

    calls = 0  # model calls in this process

    def _count(self, requests: Sequence[Request]) -> None:
        HeldModel.calls += 1
        spec = os.environ.get(HOLD_ENV)
        if spec:
            at, event_fd, release_fd = (int(part) for part in spec.split(":"))
            if HeldModel.calls == at:
                _hold(at, event_fd, release_fd)
        super()._count(requests)


def _hold(at: int, event_fd: int, release_fd: int) -> None:
    """Report ``held AT`` and block until the release pipe is readable (data, or the test closed it).
    A signal arriving meanwhile interrupts the wait as it would interrupt a model's own work."""
    os.write(event_fd, f"held {at}\n".encode())
    os.close(event_fd)
    ready, _, _ = select.select([release_fd], [], [], HOLD_LIMIT)
    os.close(release_fd)
    if not ready:
        raise RuntimeError(f"HeldModel held call {at} for {HOLD_LIMIT:.0f} s and the test never released it")


class Hold:
    """The test's side: the two pipes, the child's environment, and waiting for ``held N``."""

    def __init__(self, at: int) -> None:
        self.at = at
        self._events, self._event_w = os.pipe()
        self._release_r, self._release = os.pipe()
        self._open = [self._events, self._event_w, self._release_r, self._release]

    @property
    def env(self) -> dict[str, str]:
        return {HOLD_ENV: f"{self.at}:{self._event_w}:{self._release_r}"}

    @property
    def child_fds(self) -> tuple[int, int]:
        """What the child must inherit: ``subprocess.Popen(..., pass_fds=hold.child_fds)``."""
        return self._event_w, self._release_r

    def started(self) -> None:
        """Close this process's copies of the child's ends, once it has started: a child that ends
        without holding then reads as end-of-file in :meth:`wait_held`, not as a long silence."""
        for fd in self.child_fds:
            os.close(fd)
            self._open.remove(fd)

    def wait_held(self, timeout: float = 120.0) -> None:
        """Return once the child reports it holds call ``at``; fail the test if it ended first or
        said nothing for ``timeout`` seconds."""
        ready, _, _ = select.select([self._events], [], [], timeout)
        assert ready, f"the run did not reach model call {self.at} within {timeout:.0f} s"
        said = os.read(self._events, 64).decode()
        assert said == f"held {self.at}\n", f"the run ended before model call {self.at} (it said {said!r})"

    def release(self) -> None:
        """Let the held call go on."""
        os.write(self._release, b"go\n")

    def close(self) -> None:
        for fd in self._open:
            os.close(fd)
        self._open = []

    def __enter__(self) -> Hold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def signals_as_in_a_terminal() -> None:
    """SIGINT's, SIGTERM's and SIGHUP's default dispositions in the child. A shell runs background
    commands (a CI runner's `cmd &`) with SIGINT ignored, nohup with SIGHUP ignored, children inherit
    that, and then neither Python nor evalflow installs its handler (an ignored signal stays
    ignored, as nohup asks): a run started from a terminal is what these tests mean."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
