"""CPU seconds that processes spend inside a time window, sampled from ``/proc`` (Linux).

``benchmarks/suite_throughput.py`` measures throughput at the server, from the first request to the
last answer; on a shared machine those wall figures move with the other jobs' load, while the CPU
time the client and the servers spend per request inside that window barely does, so it prints
both. A :class:`Sampler` polls the CPU time of a process group (the run: its Python, lm-eval's
through ``peer.sh`` too, but not Ray's actors, which Ray starts in sessions of their own) and of the
server processes every ``period`` seconds, with ``time.monotonic()`` (the clock the servers' event
loops report ``first``/``last`` in); :meth:`Sampler.within` interpolates nothing: it takes the
samples inside the window and scales their CPU to the window's length.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of ``pids`` (processes that are gone count 0)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICKS


def group_members(pgid: int) -> list[int]:
    """The processes of process group ``pgid``."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[2]) == pgid:
                    members.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return members


@dataclass
class Sampler:
    """``(monotonic time, client group CPU, servers' CPU)`` every ``period`` s until :meth:`stop`."""

    pgid: int
    servers: list[int]
    period: float = 0.01
    samples: list[tuple[float, float, float]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._poll, name="cpu-sampler", daemon=True)
        self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            self.samples.append((now, cpu_seconds(group_members(self.pgid)), cpu_seconds(self.servers)))
            self._stop.wait(self.period)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def within(self, first: float, last: float) -> tuple[float, float] | None:
        """Client and server CPU seconds spent from ``first`` to ``last``; None if too few samples."""
        inside = [s for s in self.samples if first <= s[0] <= last]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        scale = (last - first) / (inside[-1][0] - inside[0][0])
        return (inside[-1][1] - inside[0][1]) * scale, (inside[-1][2] - inside[0][2]) * scale
