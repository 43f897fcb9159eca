"""Running evalflow in-process for the scale-out tests, and what two runs must share."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalflow.config.compose import compose_settings
from evalflow.run.phases import run


def run_once(
    library: Path,
    cache: Path,
    folder: Path,
    task: str = "toy_mc",
    model: dict[str, Any] | None = None,
    preset: str = "dummy",
    **values: Any,
) -> tuple[dict, dict]:
    """One run into ``folder``: (results, manifest)."""
    overrides = [f"++model.{k}={v}" for k, v in (model or {}).items()]
    settings = compose_settings(
        task=task,
        preset=preset,
        overrides=overrides,
        values={"include_path": [str(library)], "cache_dir": str(cache), "bootstrap_iters": 0, **values},
    )
    results = run(settings, folder)
    return results, json.loads((folder / "manifest.json").read_text())


def outcome(folder: Path) -> dict[str, Any]:
    """What must not depend on the worker count: every metric, and every samples file byte for byte."""
    results = json.loads((folder / "results.json").read_text())
    samples = {p.name: p.read_text() for p in sorted(folder.glob("samples_*.jsonl"))}
    assert samples, f"no samples file in {folder}"
    return {"results": results["results"], "groups": results.get("groups"), "samples": samples}


def request_entries(cache: Path) -> int:
    """How many model responses the cache folder holds."""
    import sqlite3

    try:
        with sqlite3.connect(cache / "cache.db") as conn:
            return conn.execute("SELECT COUNT(*) FROM Cache WHERE tag = 'request'").fetchone()[0]
    except sqlite3.OperationalError:  # the run is still creating the cache's tables
        return 0


@contextlib.contextmanager
def killing_the_holder(hold: Path) -> Iterator[list[dict]]:
    """While the block runs, a thread waits for a model to hold its call (``hold`` written, see
    tests/support/scale_models.py) and kills that Ray actor; yields the list of held calls killed. On exit
    the thread is stopped and joined, and anything it raised is raised here, not lost."""
    import ray

    from tests.support.scale_models import wait_held

    killed: list[dict] = []
    problems: list[BaseException] = []
    finished = threading.Event()

    def kill_the_holder() -> None:
        try:
            held = wait_held(hold, running=lambda: not finished.is_set())
            ray.kill(ray.get_actor(held["actor"], namespace="evalflow"))
            killed.append(held)
        except BaseException as exc:  # reported by the test, not lost in this thread
            problems.append(exc)

    killer = threading.Thread(target=kill_the_holder)
    killer.start()
    try:
        yield killed
    finally:
        finished.set()
        killer.join(timeout=60)
    assert not killer.is_alive() and not problems, problems
