"""The sandbox contract: a program, the limits it runs under, and what became of it.

A backend (`Sandbox`) runs ``argv`` in a separate process, never in the evaluating one, under
`Limits`. The resource limits are set by ``prlimit`` on the child (not in a ``preexec_fn``,
which is unsafe in a process that has threads, as an evaluator with torch does); the wall clock
is enforced here, by the parent, which kills the child's whole process group (it is started in a
session of its own) when time is up. ``stdin`` is fed to the child, and the first
`STDOUT_CAP` bytes of its standard output come back (the rest is read and dropped, so a
chatty program never blocks on a full pipe); stderr is discarded. Whether a program *passed* is
not the backend's to say: `evalflow.sandbox.verdict` reads it from that output.

    >>> run_limited(["/bin/cat"], Limits(wall_seconds=5), uid=os.getuid(), stdin=b"hi")
    Outcome(returncode=0, stdout=b'hi')
    >>> run_limited(["/bin/sleep", "9"], Limits(wall_seconds=0.2), uid=os.getuid()).timed_out
    True
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

GIB = 1 << 30
STDOUT_CAP = 1 << 16  # bytes of a program's output kept: a verdict line, not what a program prints
_DRAIN_SECONDS = 5.0  # after the kill, how long to wait for a process that left the group to close stdout
_PRLIMIT = shutil.which("prlimit") or "/usr/bin/prlimit"  # util-linux; resolved once: the child's PATH is empty


@dataclass(frozen=True)
class Limits:
    """What one program may use.

    Attributes:
        wall_seconds: The wall clock (the metric's `timeout`, as HF's code_eval), enforced by the
            parent, which kills the program's whole process group.
        memory_bytes: Address space (RLIMIT_AS), so a 10 GB allocation fails at once.
        max_processes: RLIMIT_NPROC headroom above what the sandbox user already runs.
        cpu_seconds: CPU time; None: the wall clock rounded up, plus one second, so that the wall
            clock decides a slow program's fate and the CPU limit only stops one that would spin
            in many processes.
    """

    wall_seconds: float = 3.0
    memory_bytes: int = 4 * GIB  # RLIMIT_AS: address space, so a 10 GB allocation fails at once
    max_processes: int = 64  # RLIMIT_NPROC headroom above what the sandbox user already runs
    cpu_seconds: int | None = None

    def cpu(self) -> int:
        return self.cpu_seconds if self.cpu_seconds is not None else math.ceil(self.wall_seconds) + 1


@dataclass(frozen=True)
class Outcome:
    """What became of one run. No "passed": the program picks its exit status, so it cannot be the
    verdict.

    Attributes:
        returncode: The exit status; None: killed at the wall clock.
        stdout: The start of its standard output (at most `STDOUT_CAP` bytes).
    """

    returncode: int | None
    stdout: bytes = b""

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


class Sandbox(Protocol):
    """A backend, registered by name (`evalflow.sandbox.registry`); `code_sandbox=NAME` picks it."""

    name: str
    description: str
    """One sentence for people (the manifest, the run's summary): what a program runs in, its limits."""

    def unavailable(self) -> str | None:
        """Whether this backend can run programs here, asked before any model call.

        Returns:
            Why it cannot (a sentence naming the fix), or None.
        """

    def run(self, argv: Sequence[str], limits: Limits, stdin: bytes = b"") -> Outcome:
        """Run a program to completion; never raises for what the program does.

        Args:
            argv: The command.
            limits: What it may use.
            stdin: Its standard input.

        Returns:
            Its exit status and the start of its output.
        """


def run_limited(
    argv: Sequence[str],
    limits: Limits,
    *,
    uid: int,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes = b"",
) -> Outcome:
    """``argv`` under ``prlimit`` in its own session; the process group is killed at the wall clock.

    ``uid`` is the user the program will run as: RLIMIT_NPROC counts every process of that user
    on the machine, so the limit is what it runs now plus ``max_processes``.
    """
    nproc = tasks_of(uid) + limits.max_processes
    command = [
        _PRLIMIT,
        f"--cpu={limits.cpu()}",
        f"--as={limits.memory_bytes}",
        f"--nproc={nproc}",
        "--core=0",
        "--",
        *argv,
    ]
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=cwd,
        env=dict(env or {}),
        start_new_session=True,
    )
    kept: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(proc.stdout, kept), daemon=True)
    reader.start()
    threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True).start()
    code: int | None
    try:
        code = proc.wait(timeout=limits.wall_seconds)
    except subprocess.TimeoutExpired:
        code = None
    _kill_group(proc)  # what it left running in its group (a daemonized child) goes too
    reader.join(_DRAIN_SECONDS)
    return Outcome(code, b"".join(list(kept))[:STDOUT_CAP])


def _feed(pipe: Any, data: bytes) -> None:
    """Write ``data`` to the child's stdin and close it; a child that ends without reading it is fine."""
    try:
        with pipe:
            pipe.write(data)
    except OSError:
        pass


def _drain(pipe: Any, kept: list[bytes]) -> None:
    """Read the child's stdout to its end, keeping the first `STDOUT_CAP` bytes."""
    size = 0
    with pipe:
        while chunk := pipe.read1(1 << 16):
            if size < STDOUT_CAP:
                kept.append(chunk)
                size += len(chunk)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def tasks_of(uid: int) -> int:
    """How many tasks (threads count, as the kernel counts them for RLIMIT_NPROC) ``uid`` runs."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                count += len(os.listdir(f"/proc/{entry.name}/task"))
        except OSError:  # the process ended meanwhile
            continue
    return count
