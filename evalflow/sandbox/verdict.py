"""Whether a program passed, as HF ``code_eval`` (what lm-eval's code tasks use) decides it.

code_eval ``exec``s ``candidate + "\\n" + test`` in a child process after its reliability guard,
and records "passed" only when ``exec`` returned: any exception (``SystemExit`` from
``sys.exit(0)`` included) is "failed", and a process that ends without a verdict (``os._exit(0)``)
is "timed out". The exit status says nothing, since the program chooses it. `RUNNER` is that
child here, run as ``python -I -c RUNNER`` through a sandbox backend: it reads a per-run random
token (first line of stdin) and the program (the rest), moves the pipe to the evaluator off fd 1
(fd 0-2 become ``/dev/null``, ``sys.std*`` a write-only buffer, as code_eval's ``swallow_io``),
applies code_eval's guard, ``exec``s the program in an empty globals dict and, only when it
returns, writes ``TOKEN passed`` to the moved pipe and ends with ``os._exit`` (no ``atexit``
handler or ``__del__`` runs after the verdict). A program cannot forge the verdict by printing
"passed" anywhere: it does not know the token. Like code_eval's guard, this is no security
boundary (a program that digs the token out of the runner's frame could forge it); isolation is
the backend's job.

    >>> from evalflow.sandbox import Limits, sandbox
    >>> run_program(sandbox("subprocess"), "assert 1 + 1 == 2", Limits(wall_seconds=10))
    True
    >>> run_program(sandbox("subprocess"), "import sys\\nsys.exit(0)", Limits(wall_seconds=10))
    False
"""

from __future__ import annotations

import secrets
import sys

from evalflow.sandbox.contract import Limits, Sandbox

RUNNER = r'''
import builtins, faulthandler, io, os, platform, secrets, shutil, subprocess, sys


class _WriteOnly(io.StringIO):
    """code_eval's WriteOnlyStringIO: what the program prints stays here; reading it raises."""

    def read(self, *args, **kwargs):
        raise OSError

    def readline(self, *args, **kwargs):
        raise OSError

    def readlines(self, *args, **kwargs):
        raise OSError

    def readable(self, *args, **kwargs):
        return False


def _guard():
    """code_eval's reliability_guard() (called without a memory limit, as code_eval calls it)."""
    faulthandler.disable()
    builtins.exit = None
    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork",
                 "forkpty", "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown",
                 "chmod", "chown", "chroot", "fchdir", "lchflags", "lchmod", "lchown", "getcwd", "chdir"):
        setattr(os, name, None)
    shutil.rmtree = None
    shutil.move = None
    shutil.chown = None
    subprocess.Popen = None
    builtins.help = None
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None


def _main():
    token, _, source = sys.stdin.buffer.read().partition(b"\n")
    line = b"\n" + token + b" passed\n"
    del token
    write, end = os.write, os._exit
    top = min(os.sysconf("SC_OPEN_MAX"), 1024)
    pipe = os.dup2(1, 3 + secrets.randbelow(max(top - 3, 1))) if top > 4 else os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    sys.stdin = sys.stdout = sys.stderr = _WriteOnly()
    _guard()
    try:
        exec(compile(source.decode("utf-8", "surrogatepass"), "<string>", "exec"), {})
    except BaseException:
        end(1)
    write(pipe, line)
    end(0)


_main()
'''
"""The child that runs one program and reports its verdict (hashed into the sandbox identity)."""


def run_program(backend: Sandbox, program: str, limits: Limits) -> bool:
    """Whether a program ran to its end: code_eval's "passed".

    Args:
        backend: The sandbox backend it runs in.
        program: Python source (a completion and its tests).
        limits: What it may use.

    Returns:
        True when the program's `exec` returned within the limits; False on any exception
            (`SystemExit` included), an early `os._exit`, or the wall clock.
    """
    token = secrets.token_hex(16)
    stdin = token.encode() + b"\n" + program.encode("utf-8", "surrogatepass")
    outcome = backend.run([sys.executable, "-I", "-c", RUNNER], limits, stdin=stdin)
    return f"{token} passed".encode() in outcome.stdout.splitlines()
