"""The bubblewrap backend's setup (issue 38, item 3): an interpreter under /tmp runs inside it, and a
failed probe names the cause it found.

Before, the sandbox's empty tmpfs over /tmp hid a venv made there (CI runners, tox), and the probe
blamed user namespaces for what was a missing interpreter.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from evalflow.sandbox import sandbox
from evalflow.sandbox.bubblewrap import probe_message

ROOT = Path(__file__).resolve().parents[2]
PROBE = ("import sys\nfrom evalflow.sandbox import Limits, run_program, sandbox\n"
         "box = sandbox('bwrap')\n"
         "print(box.unavailable())\n"
         "print(run_program(box, f'import sys\\nassert sys.prefix == {sys.prefix!r}', Limits(wall_seconds=20)))\n"
         "print(run_program(box, 'assert False', Limits(wall_seconds=20)))\n")


@pytest.mark.skipif(sandbox("bwrap").unavailable() is not None, reason="bubblewrap cannot run here")
def test_a_venv_under_tmp_runs_programs_in_the_sandbox() -> None:
    folder = tempfile.mkdtemp(prefix="evalflow-venv-", dir="/tmp")
    try:
        venv = Path(folder) / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
                       check=True, timeout=120)
        python = venv / "bin" / "python"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([str(python), "-c", PROBE], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == ["None", "True", "False"], done.stdout
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_sandbox_that_does_not_start_blames_namespaces() -> None:
    message = probe_message("bwrap: No permissions to create new namespace", sandbox_started=False)
    assert "user namespaces" in message and "No permissions to create new namespace" in message


def test_an_interpreter_that_does_not_run_inside_is_named_not_namespaces() -> None:
    why = f"setpriv: failed to execute {sys.executable}: No such file or directory"
    message = probe_message(why, sandbox_started=True)
    assert sys.executable in message and why in message and "not visible" in message
    assert "namespaces" not in message
