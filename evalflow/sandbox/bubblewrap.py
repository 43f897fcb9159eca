"""The bubblewrap backend (``code_sandbox=bwrap``, the default): each program in a throwaway container.

What a program sees: the machine's root filesystem read-only, a private empty ``/tmp`` (tmpfs),
fresh ``/dev`` and ``/proc``, an empty read-only home, no environment variables (the Python
installation it runs from is bound back read-only into ``/tmp`` or the home when it lives there: a
CI runner's or tox's venv, pyenv, conda), its own
network namespace (no interface but a down loopback: no connection leaves it), its own PID, IPC
and UTS namespaces (it sees and can signal only its own processes; killing its parent ends only
the sandbox), and it dies with the evaluator (``--die-with-parent``). When the evaluator runs as
root, the program runs as ``nobody`` (``setpriv``), since the kernel exempts root from
RLIMIT_NPROC. CPU time, address space, process count and the wall clock are limited by
:func:`evalflow.sandbox.contract.run_limited`.

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

from evalflow.sandbox.contract import Limits, Outcome, run_limited

NOBODY = 65534
_ISOLATION = (
    "--unshare-net",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--die-with-parent",
    "--new-session",
    "--clearenv",
    "--chdir",
    "/tmp",
)


class Bubblewrap:
    """The default backend: see the module docstring for what a program sees."""

    name = "bwrap"
    description = (
        "each program runs in a bubblewrap container (read-only root filesystem, empty /tmp and home, "
        "cleared environment, no network, its own PID namespace) under CPU-time, memory, process-count "
        "and wall-clock limits"
    )

    def unavailable(self) -> str | None:
        return _probe()

    def run(self, argv: Sequence[str], limits: Limits, stdin: bytes = b"") -> Outcome:
        return run_limited(command(argv), limits, uid=NOBODY if os.getuid() == 0 else os.getuid(), stdin=stdin)


def command(argv: Sequence[str]) -> list[str]:
    """The bwrap command line that runs ``argv`` isolated (also what the probe runs)."""
    bwrap = shutil.which("bwrap") or "bwrap"
    args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *_masks(), *_ISOLATION]
    if os.getuid() == 0:
        args += [
            "--cap-add",
            "CAP_SETUID",
            "--cap-add",
            "CAP_SETGID",
            shutil.which("setpriv") or "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
        ]
    return args + [_by_real_folder(argv[0]), *argv[1:]]


def _by_real_folder(program: str) -> str:
    """``program`` named through its real folder (``..`` and symlinked folders resolved), its own
    name kept; a bare name (``python``) is left to PATH.

    Inside the sandbox /tmp and the home hold only the interpreter's folders, bound back by their
    real paths (:func:`_masks`), so a path that walks through a hidden folder names nothing there:
    ``../venv/bin/python`` typed in a checkout under /tmp is ``/tmp/x/checkout/../venv/bin/python``
    and ``checkout`` is not in the sandbox. The file itself is not resolved: a venv's ``bin/python``
    is a symlink to the base interpreter, and only when started through it does Python find the
    venv's ``pyvenv.cfg`` beside it and run as the venv (its ``sys.prefix``, its packages).
    """
    folder, name = os.path.split(program)
    return os.path.join(os.path.realpath(folder), name) if folder else program


@functools.cache
def _masks() -> tuple[str, ...]:
    """An empty writable tmpfs over ``/tmp`` and an empty read-only one over the home, each with the
    interpreter's folders that lie under it bound back read-only (a venv made under ``/tmp`` by CI or
    tox; pyenv, conda and user venvs under the home)."""
    tmp = os.path.realpath("/tmp")
    args = ["--perms", "1777", "--tmpfs", tmp, *_bind_back(tmp, _interpreter_paths(tmp, import_path=False))]
    home = os.path.realpath(Path.home())
    if home != "/" and os.path.isdir(home) and not home.startswith(tmp + os.sep) and home != tmp:
        args += ["--tmpfs", home, *_bind_back(home, _interpreter_paths(home, import_path=True)), "--remount-ro", home]
    return tuple(args)


def _bind_back(mask: str, paths: Sequence[str]) -> list[str]:
    """Bind ``paths`` (under ``mask``) read-only over the empty ``mask``; their parents are made
    traversable (0755)."""
    args: list[str] = []
    made: set[str] = set()
    for path in paths:
        parent = os.path.dirname(path)
        chain = []
        while parent != mask and parent not in made:
            chain.append(parent)
            parent = os.path.dirname(parent)
        for folder in reversed(chain):
            args += ["--perms", "0755", "--dir", folder]
            made.add(folder)
        args += ["--ro-bind", path, path]
    return args


def _interpreter_paths(under: str, import_path: bool) -> list[str]:
    """The folders of this Python that lie under ``under``, outermost only: its prefixes and the
    installation its executable resolves to, and (``import_path``) the folders of its import path."""
    found = {
        os.path.realpath(p)
        for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, *(sys.path if import_path else ()))
        if p
    }
    found |= {os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    inside = sorted(p for p in found if p.startswith(under + os.sep) and os.path.isdir(p))
    return [p for p in inside if not any(p.startswith(q + os.sep) for q in inside if q != p)]


@functools.cache
def _probe() -> str | None:
    """Whether bwrap runs a Python program here (once per process): the reason it cannot, or None.
    An empty sandbox (``true``) is tried first, so that a failure names its cause: the sandbox
    itself, or this interpreter inside it."""
    missing = [
        tool for tool in ("bwrap", "prlimit") + (("setpriv",) if os.getuid() == 0 else ()) if not shutil.which(tool)
    ]
    if missing:
        return (
            f"{' and '.join(missing)} not found on PATH (bwrap is in the Debian/Ubuntu package bubblewrap, "
            "prlimit and setpriv in util-linux)"
        )
    why = _failure([shutil.which("true") or "/bin/true"])
    if why is not None:
        return probe_message(why, sandbox_started=False)
    why = _failure([sys.executable, "-I", "-c", "pass"])
    return None if why is None else probe_message(why, sandbox_started=True)


def _failure(argv: list[str]) -> str | None:
    """Why ``argv`` did not run to a zero exit in the sandbox (bwrap's last stderr line), or None."""
    try:
        done = subprocess.run(command(argv), capture_output=True, text=True, timeout=60, start_new_session=True)
    except subprocess.TimeoutExpired:
        return f"{argv[0]} did not end within 60 s"
    if done.returncode == 0:
        return None
    return (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]


def probe_message(why: str, sandbox_started: bool) -> str:
    """What the probe reports for a failure ``why``: an empty sandbox that fails to start is the
    kernel's or container's refusal; a Python that fails where ``true`` ran (``sandbox_started``)
    is this interpreter, not visible or not runnable inside, whatever the namespaces allow."""
    if not sandbox_started:
        return (
            f"bwrap cannot start a sandbox here ({why}); it needs unprivileged user namespaces "
            "(sysctl kernel.unprivileged_userns_clone=1) or root, and a container may forbid both"
        )
    return (
        f"bwrap starts a sandbox here, but this Python ({sys.executable}) does not run inside it ({why}): "
        f"its installation ({sys.prefix}) or a file it needs is not visible inside (the sandbox shows the root "
        "filesystem read-only, with /tmp and the home empty but for this interpreter's prefixes)"
    )
