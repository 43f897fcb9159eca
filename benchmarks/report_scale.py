"""The report at suite scale: the HTML of a full mmlu pair, its size and how fast chromium shows it.

    python benchmarks/report_scale.py                                  # this checkout's report
    python benchmarks/report_scale.py --baseline-src /tmp/main-head    # and an older checkout's
    python benchmarks/report_scale.py --limit 20 --rounds 5

Workload: two runs of ``task=mmlu data_map=shared`` (all 57 subjects, 14,042 documents, 0-shot)
with the dummy model under two salts, made once into ``--work`` (default
``/tmp/evalflow-report-scale``) with their own cache, and reused while their results.json exist.
Each source tree builds ``python -m evalflow report run_a run_b`` (with ``PYTHONPATH`` set to
it); the script prints the file's size, the build's wall time, and, per round in a fresh headless
chromium profile, times read from the page's own Performance API through the DevTools protocol
over ``--remote-debugging-pipe`` (no virtual time: ``--virtual-time-budget`` would make
``performance.now()`` virtual):

- ``fcp``: the ``first-contentful-paint`` paint entry (ms from navigation start);
- ``dcl``/``load``: the navigation entry's DOMContentLoaded and load event ends;
- ``charts``: when the first view is drawn: the viewer's ``main[data-view]`` (the report is the
  viewer in one file since issue 54), or in an older report every ``div.chart``'s ``<svg>``;
- ``nodes``: elements in the DOM at that point (what the page built up front);
- ``open``: then, in an older report, the time from opening the task with the largest documents
  blob (mmlu's professional_law, 1,534 documents) to its table being built (decode + DOM); the
  viewer's pages have no such blob (none).

Medians over ``--rounds`` are printed. Figures move with the machine's load (it is shared); the
ratio between the two trees on the same run is what to read.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SALTS = ("a", "b")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--proxy-server=127.0.0.1:9",
    "--window-size=1200,900",
    "--remote-debugging-pipe",
)
# Resolves once the first contentful paint is recorded and the first view is drawn: the viewer's
# (main[data-view], the report since issue 54) or, in an older report, every Vega chart.
PROBE = """new Promise(resolve => {
  const tick = () => {
    const fcp = performance.getEntriesByName("first-contentful-paint")[0];
    const charts = [...document.querySelectorAll("div.chart")];
    const drawn = charts.length ? charts.every(c => c.querySelector("svg")) : document.querySelector("main[data-view]");
    if (!fcp || !drawn) { setTimeout(tick, 5); return; }
    const nav = performance.getEntriesByType("navigation")[0];
    resolve({fcp: fcp.startTime, dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd,
             charts: performance.now(), nodes: document.getElementsByTagName("*").length});
  };
  tick();
})"""
# Opens the task with the most embedded documents; resolves when its table is built (ms taken).
OPEN_LARGEST = """new Promise(resolve => {
  const tasks = [...document.querySelectorAll("details.task-docs")];
  if (!tasks.length) { resolve(null); return; }
  const size = d => document.getElementById(d.dataset.blob).textContent.length;
  const largest = tasks.reduce((a, b) => size(b) > size(a) ? b : a);
  const start = performance.now();
  largest.open = true;
  const tick = () => largest.querySelector("table.docs") ? resolve(performance.now() - start) : setTimeout(tick, 5);
  tick();
})"""


def make_runs(work: Path, limit: int | None) -> list[Path]:
    """The two mmlu runs, made with this checkout's code unless their results.json exist."""
    runs = []
    for salt in SALTS:
        run = work / f"run_{salt}{'' if limit is None else f'_limit{limit}'}"
        if not (run / "results.json").is_file():
            shutil.rmtree(run, ignore_errors=True)
            args = [
                "task=mmlu",
                "data_map=shared",
                "model=dummy",
                f"model.salt={salt}",
                "num_fewshot=0",
                f"cache_dir={work / 'cache'}",
                f"hydra.run.dir={run}",
                *([f"limit={limit}"] if limit else []),
            ]
            print(f"making {run.name}: evalflow {' '.join(args[:5])}", flush=True)
            subprocess.run(
                [sys.executable, "-m", "evalflow", *args],
                env=_env(ROOT),
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        runs.append(run)
    return runs


def _env(src: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(src)}


def build(src: Path, runs: list[Path], out: Path) -> float:
    """Seconds to build the report with the code in ``src``."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "evalflow", "report", *map(str, runs), f"out={out}"],
        env=_env(src),
        check=True,
        stdout=subprocess.DEVNULL,
        cwd=out.parent,
    )
    return time.perf_counter() - start


class Browser:
    """A headless chromium driven over the DevTools protocol on fds 3 (to it) and 4 (from it)."""

    def __init__(self, chromium: str, profile: Path) -> None:
        to_r, self._to = os.pipe()
        self._from, from_w = os.pipe()

        def wire() -> None:  # in the child: copies first, as the pipes' own fds may be 3 or 4
            read, write = os.dup(to_r), os.dup(from_w)
            os.dup2(read, 3)  # dup2 leaves the copies inheritable (os.pipe's fds are not)
            os.dup2(write, 4)

        self.proc = subprocess.Popen(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}"],
            close_fds=False,
            preexec_fn=wire,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_r)
        os.close(from_w)
        self._next, self._buffer, self.events = 0, b"", []

    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None, timeout: float = 120.0
    ) -> dict[str, Any]:
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to, json.dumps(message).encode() + b"\0")
        reply = self.wait(lambda m: m.get("id") == self._next, timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait(self, match: Any, timeout: float = 120.0) -> dict[str, Any]:
        """The next message that ``match`` accepts (events seen on the way are kept)."""
        deadline = time.monotonic() + timeout
        for i, event in enumerate(self.events):
            if match(event):
                return self.events.pop(i)
        while True:
            while b"\0" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._from], [], [], left)[0]:
                    raise TimeoutError("chromium did not answer in time")
                self._buffer += os.read(self._from, 1 << 20)
            raw, self._buffer = self._buffer.split(b"\0", 1)
            message = json.loads(raw)
            if match(message):
                return message
            self.events.append(message)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        os.close(self._to)
        os.close(self._from)


def measure_page(chromium: str, page: Path) -> dict[str, float]:
    """One cold load of ``page`` in a fresh profile: the PROBE's figures."""
    with tempfile.TemporaryDirectory(prefix="report_scale_profile_", ignore_cleanup_errors=True) as profile:
        browser = Browser(chromium, Path(profile))
        try:
            target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            browser.send("Page.enable", session=session)
            browser.send("Page.navigate", {"url": page.as_uri()}, session=session)
            browser.wait(lambda m: m.get("method") == "Page.loadEventFired" and m.get("sessionId") == session)
            figures = {}
            for name, expression in (("page", PROBE), ("open", OPEN_LARGEST)):
                result = browser.send(
                    "Runtime.evaluate",
                    {"expression": expression, "awaitPromise": True, "returnByValue": True},
                    session=session,
                )
                figures[name] = result["result"]["value"]
            return {**figures["page"], "open": figures["open"]}
        finally:
            browser.close()


def report(name: str, src: Path, runs: list[Path], out_dir: Path, chromium: str, rounds: int) -> dict[str, float]:
    page = out_dir / f"report_{name}.html"
    seconds = build(src, runs, page)
    samples = [measure_page(chromium, page) for _ in range(rounds)]
    figures = {k: statistics.median(s[k] for s in samples) if samples[0][k] is not None else None for k in samples[0]}
    opened = "no per-task blobs" if figures["open"] is None else f"{figures['open']:.0f} ms"
    print(
        f"{name:>8}: {page.stat().st_size / 1e6:7.2f} MB, built in {seconds:5.1f} s; median of {rounds}: "
        f"first contentful paint {figures['fcp']:7.0f} ms, DOMContentLoaded {figures['dcl']:7.0f} ms, "
        f"load {figures['load']:7.0f} ms, first view drawn {figures['charts']:7.0f} ms, "
        f"{figures['nodes']:.0f} elements; opening the largest task's documents {opened}",
        flush=True,
    )
    return {"bytes": page.stat().st_size, "build_s": seconds, **figures}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "evalflow-report-scale")
    parser.add_argument("--baseline-src", type=Path, help="a checkout of the code to compare against")
    parser.add_argument("--limit", type=int, help="documents per subject (default: all 14,042)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    args.work.mkdir(parents=True, exist_ok=True)
    runs = make_runs(args.work, args.limit)
    print(
        f"mmlu pair ({'all documents' if args.limit is None else f'limit={args.limit}'}), 0-shot, "
        f"dummy model salts {'/'.join(SALTS)}",
        flush=True,
    )
    now = report("current", ROOT, runs, args.work, chromium, args.rounds)
    if args.baseline_src:
        before = report("baseline", args.baseline_src.resolve(), runs, args.work, chromium, args.rounds)
        print(
            f"   ratio: size {before['bytes'] / now['bytes']:.1f}x smaller, first contentful paint "
            f"{before['fcp'] / now['fcp']:.1f}x sooner, load {before['load'] / now['load']:.1f}x sooner"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
