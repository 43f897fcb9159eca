"""A pre-imported parent process that forks real ``python -m evalflow`` runs on request.

The kill test starts and SIGKILLs dozens of runs; paying Python's and the libraries' import time
(hydra, datasets, numpy: seconds on a busy machine) for each would blow the test budget. This
process imports them once and forks a child per run; the child sets its argv, environment, working
folder and output file and calls :func:`evalflow.commands.main.entry`, exactly what ``python -m
evalflow`` does. The test sends the child's SIGKILL itself, by pid.

Protocol, one JSON object per line. stdin: ``{"argv": [...], "env": {...}, "cwd": dir, "out":
file, "err": file or null (then with out)}``; stdout: ``{"pid": N}`` once the child is forked, then
``{"pid": N, "status": S}`` when it ended (S: exit code, or minus the signal number). One child at
a time.

Test instrumentation (only in children whose env sets ``EVALFLOW_TEST_EVENTS``): every stage
function and the run folder's file writer append ``begin <stage> <task>`` / ``write <file>``
lines to that file, then sleep ``EVALFLOW_TEST_PAUSE`` seconds, so a kill can be aimed at a phase.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

_WARM = (
    "datasets.packaged_modules.json.json",
    "scipy.sparse",
    "scipy.io",
    "charset_normalizer",
    "numpy.testing",
    "fileinput",
    "rich._emoji_codes",
    "encodings.idna",
)


def _event(line: str) -> None:
    with open(os.environ["EVALFLOW_TEST_EVENTS"], "a") as fh:
        fh.write(line + "\n")


def _paused_stage(name: str, real: Callable[..., Any], pause: float) -> Callable[..., Any]:
    @functools.wraps(real)  # keeps the signature: the runner passes inputs by parameter name
    def stage(*args: Any, **kwargs: Any) -> Any:
        task = kwargs.get("task")
        _event(f"begin {name} {getattr(task, 'task', '?')}")
        time.sleep(pause)
        return real(*args, **kwargs)

    return stage


def instrument() -> None:
    from evalflow.dag.pipeline import PIPELINE
    from evalflow.output import run_folder

    pause = float(os.environ.get("EVALFLOW_TEST_PAUSE", "0.05"))
    for node in PIPELINE:
        module_name, _, attr = node.function.partition(":")
        module = importlib.import_module(module_name)
        setattr(module, attr, _paused_stage(node.name, getattr(module, attr), pause))
    real_write = run_folder.atomic_write

    def atomic_write(path: Any, chunks: Any) -> None:
        _event(f"write {path.name}")
        time.sleep(pause)
        real_write(path, chunks)

    run_folder.atomic_write = atomic_write


def child(job: dict[str, Any]) -> None:
    """In the forked child: become ``python -m evalflow ARGV`` and exit with its status."""
    code = 1
    try:
        out = os.open(job["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        err = os.open(job["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) if job.get("err") else out
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.chdir(job["cwd"])
        os.environ.update(job.get("env", {}))
        if os.environ.get("EVALFLOW_TEST_EVENTS"):
            instrument()
        from evalflow.commands.main import entry

        sys.argv = ["evalflow", *job["argv"]]
        try:
            entry()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    import datasets  # noqa: F401 - the expensive imports, done once
    import hydra  # noqa: F401

    import evalflow.commands.main
    import evalflow.config.compose
    import evalflow.output.table
    import evalflow.run.phases
    import evalflow.stages  # noqa: F401
    import tests.support.models  # noqa: F401

    for name in _WARM:  # what datasets' streaming patches import on the first load_dataset
        try:
            importlib.import_module(name)
        except ImportError:
            pass

    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            child(job)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        print(json.dumps({"pid": pid, "status": code}), flush=True)


if __name__ == "__main__":
    main()
