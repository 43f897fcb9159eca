"""Index lm-eval's whole shipped task library: evalflow cold and warm vs lm-eval's TaskManager.

    python benchmarks/index_time.py [--repeats 3] [--library PATH]

Each measurement runs in a fresh process (no in-process memo helps). "cold" uses an empty temp
cache folder; "warm" reuses it. "build" is the time inside ``TaskIndex.build`` /
``TaskManager()``; "ls" is the wall time of the whole ``python -m evalflow ls --json`` command,
interpreter start-up and imports included (wall and CPU time: on a busy machine the CPU time is
the stable number). lm-eval's time is measured in the same run, with the
peer venv's python (``~/.cache/evalflow-peer/venv``). Prints the numbers and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEER_PYTHON = Path.home() / ".cache" / "evalflow-peer" / "venv" / "bin" / "python"
LIBRARY = PEER_PYTHON.parents[1] / "lib" / "python3.11" / "site-packages" / "lm_eval" / "tasks"

EVALFLOW_BUILD = """
import json, sys, time
t = time.perf_counter()
from evalflow.taskspec.catalog.index import TaskIndex
index = TaskIndex.build([sys.argv[1]], builtin=False)
print(json.dumps({"seconds": time.perf_counter() - t, "tasks": len(index.task_names()),
                  "groups": len(index.group_names()), "tags": len(index.tag_names())}))
"""

LM_EVAL_BUILD = """
import json, time
from lm_eval.tasks import TaskManager
t = time.perf_counter()
tm = TaskManager()
print(json.dumps({"seconds": time.perf_counter() - t, "tasks": len(tm.all_subtasks),
                  "groups": len(tm.all_groups), "tags": len(tm.all_tags)}))
"""


def run_json(cmd: list[str], env: dict[str, str]) -> dict:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def wall_and_cpu(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one child process.

    CPU time is what the command costs; wall time also counts waiting for a busy machine.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, capture_output=True, env=env, check=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--library", type=Path, default=LIBRARY)
    args = parser.parse_args()
    if not args.library.is_dir():
        sys.exit(f"no task library at {args.library}; install the peer venv or pass --library")
    library = str(args.library)
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "EVALFLOW_CACHE": cache, "PYTHONPATH": str(ROOT)}
        build = [sys.executable, "-c", EVALFLOW_BUILD, library]
        ls = [sys.executable, "-m", "evalflow", "ls", "--json", "builtin=false", f"include_path=[{library}]"]
        cold = run_json(build, env)
        warm = [run_json(build, env)["seconds"] for _ in range(args.repeats)]
        ls_warm = [wall_and_cpu(ls, env) for _ in range(args.repeats)]
    print(f"library: {library}")
    print(f"evalflow: {cold['tasks']} tasks, {cold['groups']} groups, {cold['tags']} tags")
    print(f"evalflow cold build      {cold['seconds']:7.3f} s")
    print(f"evalflow warm build      {statistics.median(warm):7.3f} s  (median of {args.repeats})")
    ls_wall = statistics.median(w for w, _ in ls_warm)
    ls_cpu = statistics.median(c for _, c in ls_warm)
    print(f"evalflow warm `ls --json` {ls_wall:6.3f} s  wall ({ls_cpu:.3f} s cpu), start-up included")
    if not PEER_PYTHON.exists():
        print("lm-eval: peer venv absent, no comparison")
        return
    peer_env = {**os.environ, "LMEVAL_LOG_LEVEL": "ERROR"}
    lm = run_json([str(PEER_PYTHON), "-c", LM_EVAL_BUILD], peer_env)
    print(f"lm-eval:  {lm['tasks']} tasks, {lm['groups']} groups, {lm['tags']} tags")
    print(f"lm-eval TaskManager()    {lm['seconds']:7.3f} s")
    print(f"ratio lm-eval / evalflow cold: {lm['seconds'] / cold['seconds']:6.1f}x")
    print(f"ratio lm-eval / evalflow warm: {lm['seconds'] / statistics.median(warm):6.1f}x")


if __name__ == "__main__":
    main()
