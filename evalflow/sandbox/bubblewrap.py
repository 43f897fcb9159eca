"""The bubblewrap backend (``code_sandbox=bwrap``, the default): each program in a throwaway container.

What a program sees: the machine's root filesystem read-only, a private empty ``/tmp`` (tmpfs),
fresh ``/dev`` and ``/proc``, an empty read-only home (only the Python installation it runs from is
bound back into it, read-only, when that lives under the home), no environment variables, its own
network namespace (no interface but a down loopback: no connection leaves it), its own PID, IPC
and UTS namespaces (it sees and can signal only its own processes; killing its parent ends only
the sandbox), and it dies with the evaluator (``--die-with-parent``). When the evaluator runs as
root, the program runs as ``nobody`` (``setpriv``), since the kernel exempts root from
RLIMIT_NPROC. CPU time, address space, process count and the wall clock are limited by
:func:`evalflow.sandbox.base.run_limited`.

    >>> sandbox = Bubblewrap()
    >>> sandbox.unavailable() is None or "bubblewrap" in sandbox.unavailable()
    True
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from evalflow.sandbox.base import Limits, Outcome, run_limited

NOBODY = 65534
_ISOLATION = ("--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
              "--new-session", "--clearenv", "--chdir", "/tmp")


class Bubblewrap:
    """Programs in bubblewrap (Debian/Ubuntu package ``bubblewrap``), with the limits of ``Limits``."""

    name = "bwrap"

    def unavailable(self) -> str | None:
        return _probe()

    def run(self, argv: Sequence[str], limits: Limits) -> Outcome:
        return run_limited(command(argv), limits, uid=NOBODY if os.getuid() == 0 else os.getuid())


def command(argv: Sequence[str]) -> list[str]:
    """The bwrap command line that runs ``argv`` isolated (also what the probe runs)."""
    bwrap = shutil.which("bwrap") or "bwrap"
    args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--perms", "1777", "--tmpfs", "/tmp",
            *_hidden_home(), *_ISOLATION]
    if os.getuid() == 0:
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", shutil.which("setpriv") or "setpriv",
                 f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--"]
    return args + list(argv)


@functools.cache
def _hidden_home() -> tuple[str, ...]:
    """An empty read-only tmpfs over the home, with the interpreter's folders bound back into it
    (pyenv, conda and user venvs live there); their parents are made traversable (0755)."""
    home = os.path.realpath(Path.home())
    if home == "/" or not os.path.isdir(home):
        return ()
    needed = _interpreter_paths(home)
    args = ["--tmpfs", home]
    made: set[str] = set()
    for path in needed:
        parent = os.path.dirname(path)
        chain = []
        while parent != home and parent not in made:
            chain.append(parent)
            parent = os.path.dirname(parent)
        for folder in reversed(chain):
            args += ["--perms", "0755", "--dir", folder]
            made.add(folder)
        args += ["--ro-bind", path, path]
    return (*args, "--remount-ro", home)


def _interpreter_paths(home: str) -> list[str]:
    """The folders of this Python (prefixes, the import path) that lie under ``home``, outermost only."""
    found = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path) if p}
    found |= {os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    inside = sorted(p for p in found if p.startswith(home + os.sep) and os.path.isdir(p))
    return [p for p in inside if not any(p.startswith(q + os.sep) for q in inside if q != p)]


@functools.cache
def _probe() -> str | None:
    """Whether bwrap runs a Python program here (once per process): the reason it cannot, or None."""
    missing = [tool for tool in ("bwrap", "prlimit") + (("setpriv",) if os.getuid() == 0 else ()) if not shutil.which(tool)]
    if missing:
        return (f"{' and '.join(missing)} not found on PATH (bwrap is in the Debian/Ubuntu package bubblewrap, "
                "prlimit and setpriv in util-linux)")
    try:
        done = subprocess.run(command([sys.executable, "-I", "-c", "pass"]), capture_output=True, text=True,
                              timeout=60, start_new_session=True)
    except subprocess.TimeoutExpired:
        return "bwrap did not start a Python program within 60 s"
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return (f"bwrap cannot start a sandbox here ({why}); it needs unprivileged user namespaces "
                "(sysctl kernel.unprivileged_userns_clone=1) or root, and a container may forbid both")
    return None
