"""The bubblewrap backend's setup (issue 38, item 3; issue 49): an interpreter under /tmp runs inside
it, also when named through a folder the sandbox hides (``../venv/bin/python``), and a failed probe
names the cause it found.

Before, the sandbox's empty tmpfs over /tmp hid a venv made there (CI runners, tox), the probe
blamed user namespaces for what was a missing interpreter, and an interpreter path with ``..``
named nothing inside the sandbox.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalflow.sandbox import sandbox
from evalflow.sandbox.bubblewrap import probe_message

ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    "import os, sys\nfrom evalflow.sandbox import Limits, run_program, sandbox\n"
    "box = sandbox('bwrap')\n"
    "print(box.unavailable())\n"
    "prefix = os.path.realpath(sys.prefix)\n"
    "print(run_program(box, f'import os, sys\\nassert os.path.realpath(sys.prefix) == {prefix!r}', "
    "Limits(wall_seconds=20)))\n"
    "print(run_program(box, 'assert False', Limits(wall_seconds=20)))\n"
)
needs_bwrap = pytest.mark.skipif(sandbox("bwrap").unavailable() is not None, reason="bubblewrap cannot run here")


@pytest.fixture
def tmp_venv() -> Iterator[Path]:
    """A venv under /tmp that sees this environment's packages (evalflow's dependencies), whatever
    the base interpreter holds: a ``.pth`` in it adds this environment's site folders, their own
    ``.pth`` files included. (``--system-site-packages`` would add the *base* interpreter's, which
    on a fresh machine hold nothing but the standard library.)"""
    folder = Path(tempfile.mkdtemp(prefix="evalflow-venv-", dir="/tmp"))
    try:
        venv = folder / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        purelib = subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.strip()
        adds = "".join(f"import site; site.addsitedir({path!r})\n" for path in site.getsitepackages())
        (Path(purelib) / "running_environment.pth").write_text(adds)
        yield venv
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _probe(python: str, cwd: Path) -> None:
    """Run :data:`PROBE` with ``python`` (as typed, from ``cwd``): the sandbox is available, runs a
    program as this venv (its ``sys.prefix``) and fails a failing one."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [python, "-c", PROBE], check=False, capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["None", "True", "False"], done.stdout


@needs_bwrap
def test_a_venv_under_tmp_runs_programs_in_the_sandbox(tmp_venv: Path) -> None:
    _probe(str(tmp_venv / "bin" / "python"), ROOT)


@needs_bwrap
def test_an_interpreter_path_with_dotdot_runs_programs_in_the_sandbox(tmp_venv: Path) -> None:
    """``../venv/bin/python`` typed in a checkout beside the venv: ``sys.executable`` keeps the
    ``..``, through a folder the sandbox hides, so the sandbox must name the interpreter by its real
    folder (the venv's ``bin/python`` symlink kept, so the program still runs as the venv)."""
    checkout = tmp_venv.parent / "checkout"
    checkout.mkdir()
    _probe("../venv/bin/python", checkout)


def test_a_sandbox_that_does_not_start_blames_namespaces() -> None:
    message = probe_message("bwrap: No permissions to create new namespace", sandbox_started=False)
    assert "user namespaces" in message and "No permissions to create new namespace" in message


def test_an_interpreter_that_does_not_run_inside_is_named_not_namespaces() -> None:
    why = f"setpriv: failed to execute {sys.executable}: No such file or directory"
    message = probe_message(why, sandbox_started=True)
    assert sys.executable in message and why in message and "not visible" in message
    assert "namespaces" not in message
