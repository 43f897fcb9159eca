"""Helpers for the reliability tests: running ``python -m evalflow`` (as a subprocess, or forked
from a pre-imported :mod:`tests.support.zygote`), and reading what a run left on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.paths import ROOT
from tests.support.runs import COUNTING

# Offline and single-threaded BLAS: the hub is unreachable, and forked children must not inherit
# a half-initialized thread pool.
QUIET_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OPENBLAS_NUM_THREADS": "1", "TQDM_DISABLE": "1"}


def env_with(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **QUIET_ENV, **(extra or {})}
    for key in ("EVALFLOW_DEBUG", "HYDRA_FULL_ERROR", "EVALFLOW_TEST_CALL_LOG", "EVALFLOW_TEST_DELAY"):
        if extra is None or key not in extra:
            env.pop(key, None)
    return env


def cli(args: list[str], env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m evalflow ARGS`` in a fresh interpreter, from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "evalflow", *args],
        cwd=ROOT,
        env=env_with(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def popen(args: list[str], env: dict[str, str] | None = None, out: Path | None = None) -> subprocess.Popen:
    sink = open(out, "w") if out else subprocess.DEVNULL  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [sys.executable, "-m", "evalflow", *args], cwd=ROOT, env=env_with(env), stdout=sink, stderr=subprocess.STDOUT
    )


def toy_args(library: Path, cache: Path, run_dir: Path, *extra: str, task: str = "[toy_mc,toy_gen]") -> list[str]:
    return [
        "model=dummy",
        f"model.type={COUNTING}",
        f"task={task}",
        f"include_path=[{library}]",
        f"cache_dir={cache}",
        "bootstrap_iters=0",
        f"hydra.run.dir={run_dir}",
        *extra,
    ]


def request_keys(cache: Path) -> set[str]:
    """The per-request response entries in a cache folder."""
    from evalflow.cache.store import CacheStore

    store = CacheStore(cache)
    try:
        return {k for k in store.raw.iterkeys() if str(k).startswith("request:")}
    finally:
        store.close()


def calls(log: Path) -> int:
    """Requests the CountingModel answered, from its call log (one line per model call)."""
    return sum(int(n) for n in log.read_text().split()) if log.exists() else 0


def results_of(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "results.json").read_text())


def samples_of(run_dir: Path) -> dict[str, list[Any]]:
    return {
        p.name: [json.loads(line) for line in p.read_text().splitlines()]
        for p in sorted(run_dir.glob("samples_*.jsonl"))
    }


@dataclass
class Child:
    pid: int
    out: Path


class Zygote:
    """Client of :mod:`tests.support.zygote`: forks ``python -m evalflow`` runs, one at a time."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.zygote"],
            cwd=ROOT,
            env=env_with(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._read()  # {"ready": pid}

    def _read(self) -> dict[str, Any]:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the zygote died (exit {self.proc.poll()})")
        return json.loads(line)

    def start(self, argv: list[str], out: Path, env: dict[str, str] | None = None, err: Path | None = None) -> Child:
        job = {"argv": argv, "env": env or {}, "cwd": str(ROOT), "out": str(out), "err": str(err) if err else None}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        return Child(self._read()["pid"], out)

    def wait(self) -> int:
        """The status of the last child: its exit code, or minus the signal that ended it."""
        return int(self._read()["status"])

    def run(self, argv: list[str], out: Path, env: dict[str, str] | None = None, err: Path | None = None) -> int:
        self.start(argv, out, env, err)
        return self.wait()

    def cli(self, argv: list[str], folder: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """Like :func:`cli`, forked from the zygote: the outputs are kept in ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        code = self.run(argv, folder / "stdout", env, folder / "stderr")
        return subprocess.CompletedProcess(argv, code, (folder / "stdout").read_text(), (folder / "stderr").read_text())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def wait_for(condition: Callable[[], bool], alive: Callable[[], bool], timeout: float = 120) -> bool:
    """Poll ``condition`` until true (True), or until ``alive`` turns false (False: the process
    ended first). A process still alive after ``timeout`` s without the condition fails the test:
    that is a hung run, not one that outpaced the wait."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if not alive():
            return condition()
        time.sleep(0.003)
    raise AssertionError(f"the condition did not hold within {timeout:.0f} s and the process is still running")


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is running (a zombie awaiting its parent's wait counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
