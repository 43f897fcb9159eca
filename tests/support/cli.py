"""``python -m evalflow`` as a user runs it, in a child process: the command line, the toy library's
arguments, and a run held at a chosen model call (tests/support/hold.py) for kill tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.hold import HELD, Hold, signals_as_in_a_terminal
from tests.support.paths import ROOT
from tests.support.runs import COUNTING


def cli(args: list[str], env_extra: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    """``python -m evalflow ARGS`` from the checkout, this checkout's evalflow imported."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "evalflow", *args],
        cwd=kw.pop("cwd", ROOT),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        **kw,
    )


def base_args(lib: Path, cache: Path) -> list[str]:
    """toy_mc with the counting model from the library ``lib``, on the cache ``cache``."""
    return [
        "model=dummy",
        f"model.type={COUNTING}",
        "task=toy_mc",
        f"include_path=[{lib}]",
        f"cache_dir={cache}",
        "bootstrap_iters=0",
    ]


def held_args(lib: Path, cache: Path) -> list[str]:
    """:func:`base_args` with the model that holds a chosen call (tests/support/hold.py)."""
    return [f"model.type={HELD}" if a.startswith("model.type=") else a for a in base_args(lib, cache)]


def start_held(args: list[str], hold: Hold, logs: Path) -> subprocess.Popen:
    """``python -m evalflow ARGS`` with ``hold``'s pipes, stdout and stderr into ``logs``.{out,err}
    (files, not pipes: nobody reads a pipe while the test waits for the hold, and a full one would
    stall the run before it got there). Returns once the child has started."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONFAULTHANDLER": "1", **hold.env}  # SIGABRT dumps every thread
    with open(f"{logs}.out", "w") as out, open(f"{logs}.err", "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "evalflow", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=err,
            pass_fds=hold.child_fds,
            preexec_fn=signals_as_in_a_terminal,
        )
    hold.started()
    return proc


def wait_or_dump(proc: subprocess.Popen, logs: Path, timeout: float = 120.0) -> int:
    """``proc``'s exit code; if it has not ended within ``timeout`` s, fail the test with the stack
    of each of its threads (faulthandler, on SIGABRT) and its stderr, so a hang says where it is."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        proc.wait(timeout=60)
        raise AssertionError(
            f"the run did not end within {timeout:.0f} s of the signal; its threads and stderr:\n"
            + Path(f"{logs}.err").read_text()[-6000:]
        ) from None


MY_TASK = """\
task: mytask
dataset_path: json
dataset_kwargs:
  data_files:
    test: data.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{q}}"
doc_to_target: label
doc_to_choice: ["a", "b"]
"""


def cli_in(args: list[str], cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    """``python -m evalflow ARGS`` run from ``cwd`` (a task folder) with ``cache`` as $EVALFLOW_CACHE."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALFLOW_CACHE": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "evalflow", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def task_folder(folder: Path) -> Path:
    """``folder`` made into a task folder: mytask.yaml beside its 12 rows of data."""
    folder.mkdir(parents=True)
    (folder / "mytask.yaml").write_text(MY_TASK)
    (folder / "data.jsonl").write_text("".join(json.dumps({"q": f"q{i}", "label": i % 2}) + "\n" for i in range(12)))
    return folder
