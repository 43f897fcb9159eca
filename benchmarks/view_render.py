"""``evalflow view`` in the browser at suite scale: how soon the page *shows* the runs list, the full
mmlu run and its largest task's first samples page after the server starts (benchmarks/view_speed.py
times the JSON; this times what a person waits for: request, JSON, DOM built, drawn).

    python benchmarks/view_speed.py            # makes the runs once into /tmp/evalflow-view-speed
    python benchmarks/view_render.py           # then this, over the same runs
    python benchmarks/view_render.py --work DIR --rounds 5

Each round starts ``python -m evalflow view WORK/mmlu WORK/sweep port=0`` afresh (a cold catalog and
cold samples indexes) and, from the moment it prints its URL, drives headless chromium (Playwright,
/usr/bin/chromium) through: ``runs`` (every row of the runs list drawn), ``run`` (the mmlu run's page
with its results table), ``samples`` (the first 50 rows of mmlu_professional_law, 1,534 documents,
its index built on this request), ``search`` (a text search on that page, typed and submitted).
Medians over ``--rounds``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
LARGEST = "mmlu_professional_law"
CHROMIUM = "/usr/bin/chromium"


def _route(*parts: str) -> str:
    return "#/" + "/".join(quote(p, safe="!*'()") for p in parts)


def one_round(browser: object, roots: list[Path], mmlu: Path) -> dict[str, float]:
    """A fresh server and a fresh page: seconds from the server's URL line to each view drawn."""
    from playwright.sync_api import expect

    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "evalflow", "view", *map(str, roots), "port=0"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[2]
        page = browser.new_page()  # type: ignore[attr-defined]
        t0 = time.perf_counter()
        page.goto(url + "#/runs")
        page.wait_for_selector("#runs tbody tr")
        n_runs = page.locator("#runs tbody tr").count()
        t_runs = time.perf_counter() - t0
        with urllib.request.urlopen(url + "api/runs", timeout=120) as response:
            runs = json.loads(response.read())["runs"]
        run_id = next(r["id"] for r in runs if Path(r["path"]).resolve() == mmlu.resolve())
        t1 = time.perf_counter()
        page.goto(url + _route("run", run_id))
        expect(page.locator("#results tbody tr").first).to_be_visible(timeout=60_000)
        t_run = time.perf_counter() - t1
        t2 = time.perf_counter()
        page.goto(url + _route("samples", run_id, LARGEST))
        expect(page.locator("#samples tbody tr")).to_have_count(50, timeout=60_000)
        t_samples = time.perf_counter() - t2
        t3 = time.perf_counter()
        page.fill("#q-text", "the court")
        page.press("#q-text", "Enter")
        page.wait_for_function("() => location.hash.includes('text=') && document.querySelector('main[data-view]')")
        expect(page.locator("#samples-count")).not_to_have_text("1–50 of 1534", timeout=60_000)
        t_search = time.perf_counter() - t3
        page.close()
        return {"runs": t_runs, "run": t_run, "samples": t_samples, "search": t_search, "n_runs": n_runs}
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/evalflow-view-speed"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    mmlu, sweep = args.work / "mmlu", args.work / "sweep"
    if not (mmlu / "results.json").is_file() or not sweep.is_dir():
        print(f"no runs in {args.work}: make them with python benchmarks/view_speed.py --work {args.work}")
        return 2
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        rounds = [one_round(browser, [mmlu, sweep], mmlu) for _ in range(args.rounds)]
        browser.close()
    print(f"evalflow view in chromium, {rounds[0]['n_runs']:.0f} runs, medians of {len(rounds)} fresh servers:")
    for key in ("runs", "run", "samples", "search"):
        values = [r[key] for r in rounds]
        print(f"  {key:8s} {statistics.median(values):6.3f} s   (rounds: {', '.join(f'{v:.3f}' for v in values)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
