"""``evalflow view`` at suite scale: how soon the runs list and a run's first samples page answer
after the server starts, over the full mmlu run and a 50-run sweep, and how much memory it takes.

    python benchmarks/view_speed.py                        # makes the runs once into --work, reuses them
    python benchmarks/view_speed.py --mmlu outputs/mmlu_run --sweep outputs/multirun/2026-12-01/10-00-00
    python benchmarks/view_speed.py --rounds 5

Workload (made with this checkout's code unless their results.json exist, like report_scale.py):
``task=mmlu data_map=shared model=dummy num_fewshot=0`` (57 subjects, 14,042 documents) into
``WORK/mmlu``, and a sweep of ``--jobs`` (50) runs, ``task=arc_easy limit=50 model.salt=s0..s49``,
into ``WORK/sweep``. Each round starts ``python -m evalflow view WORK port=0`` afresh (a new
process: a cold catalog and cold samples indexes) and measures, from the moment it prints its URL:

- ``runs``: ``GET /api/runs`` (every run found and summarised);
- ``samples_cold``: then the first page of the mmlu run's largest task (professional_law, 1,534
  documents), its index built on this request;
- ``samples_warm``: the next page of the same task, its index built;
- ``search``: a text search over that task (``text=the``);
- ``rss``: the server's peak resident memory (VmHWM) after those requests.

Baselines measured in the same round: ``parse``: ``json.loads`` of every line of that samples file
(what a server without an index would do per request); ``load_all``: ``load_run`` of every run
(reading every results.json). Medians over ``--rounds``; the ratios to the baselines are what to
read on a shared machine, the seconds are what the issue's "< 1 s" asks.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
if (ROOT / "evalflow").is_dir():
    sys.path.insert(0, str(ROOT))  # this checkout's evalflow, as the server it starts runs it
SHARED_DATA = (ROOT / ".." / "shared" / "data").resolve()


def _env() -> dict[str, str]:
    """This checkout's evalflow first (a copy of benchmarks/ alone: the installed one)."""
    paths = [str(ROOT)] if (ROOT / "evalflow").is_dir() else []
    paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONDONTWRITEBYTECODE": "1"}


def largest_task(run: Path) -> str:
    """The task of the run's largest samples file (mmlu's professional_law, 1,534 documents)."""
    from evalflow.output.run_paths import samples_files

    files = samples_files(run)
    if not files:
        raise SystemExit(f"{run}: no samples files; give a run made with log_samples=true")
    return max(files, key=lambda task: files[task].stat().st_size)


def _evalflow(args: list[str]) -> None:
    print(f"making: evalflow {' '.join(args[:6])} ...", flush=True)
    subprocess.run([sys.executable, "-m", "evalflow", *args], env=_env(), check=True, stdout=subprocess.DEVNULL)


def make_mmlu(work: Path) -> Path:
    run = work / "mmlu"
    if not (run / "results.json").is_file():
        shutil.rmtree(run, ignore_errors=True)
        _evalflow(
            [
                "task=mmlu",
                "data_map=shared",
                "model=dummy",
                "num_fewshot=0",
                f"cache_dir={work / 'cache'}",
                f"hydra.run.dir={run}",
            ]
        )
    return run


def make_sweep(work: Path, jobs: int) -> Path:
    sweep = work / "sweep"
    if len(list(sweep.glob("*/results.json"))) < jobs:
        shutil.rmtree(sweep, ignore_errors=True)
        salts = ",".join(f"s{i}" for i in range(jobs))
        _evalflow(
            [
                "-m",
                "task=arc_easy",
                "data_map=shared",
                "model=dummy",
                "limit=50",
                f"model.salt={salts}",
                f"cache_dir={work / 'cache'}",
                f"hydra.sweep.dir={sweep}",
            ]
        )
    return sweep


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=120) as resp:
        return json.loads(resp.read())


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def one_round(roots: list[Path], mmlu: Path, task: str) -> dict[str, float]:
    """A fresh server over ``roots``: the timings from its URL line on, and its peak memory."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalflow", "view", *map(str, roots), "port=0"],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        started = time.perf_counter()
        line = proc.stdout.readline()
        up = time.perf_counter() - started
        url = line.split()[2]
        t0 = time.perf_counter()
        runs = _get(url + "api/runs")["runs"]
        t_runs = time.perf_counter() - t0
        run_id = next(r["id"] for r in runs if Path(r["path"]).resolve() == mmlu.resolve())
        base = f"{url}api/samples?id={quote(run_id, safe='')}&task={task}"
        t1 = time.perf_counter()
        page = _get(base + "&limit=50")
        t_cold = time.perf_counter() - t1
        t2 = time.perf_counter()
        _get(base + "&limit=50&offset=50")
        t_warm = time.perf_counter() - t2
        t3 = time.perf_counter()
        _get(base + "&limit=50&text=the")
        t_search = time.perf_counter() - t3
        rss = _peak_rss_mb(proc.pid)
        assert page["total"] > 0 and len(runs) > 1, (page["total"], len(runs))
        return {
            "start": up,
            "runs": t_runs,
            "samples_cold": t_cold,
            "samples_warm": t_warm,
            "search": t_search,
            "rss_mb": rss,
            "n_runs": len(runs),
        }
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def baselines(roots: list[Path], mmlu: Path, task: str) -> dict[str, float]:
    from evalflow.output.run_folder import load_run
    from evalflow.output.run_paths import samples_file

    t0 = time.perf_counter()
    with open(samples_file(mmlu, task), encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    parse = time.perf_counter() - t0
    t1 = time.perf_counter()
    folders = [p.parent for root in roots for p in root.rglob("results.json")]
    for folder in folders:
        load_run(folder)
    load_all = time.perf_counter() - t1
    assert rows
    return {"parse": parse, "load_all": load_all}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/evalflow-view-speed"))
    parser.add_argument("--mmlu", type=Path, help="an existing full mmlu run folder (else made in --work)")
    parser.add_argument("--sweep", type=Path, help="an existing sweep folder (else made in --work)")
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if (args.mmlu is None or args.sweep is None) and not SHARED_DATA.is_dir():
        print(f"the shared data folder {SHARED_DATA} is absent: give --mmlu and --sweep", file=sys.stderr)
        return 2
    args.work.mkdir(parents=True, exist_ok=True)
    mmlu = args.mmlu or make_mmlu(args.work)
    sweep = args.sweep or make_sweep(args.work, args.jobs)
    roots = [mmlu, sweep]
    task = largest_task(mmlu)
    rounds = []
    for i in range(args.rounds):
        measured = {**one_round(roots, mmlu, task), **baselines(roots, mmlu, task)}
        rounds.append(measured)
        print(f"round {i + 1}: " + "  ".join(f"{k}={v:.3f}" for k, v in measured.items()), flush=True)
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    print(
        f"\n{int(med['n_runs'])} runs (mmlu: {mmlu}, sweep: {sweep}), samples of {task}; "
        f"medians of {args.rounds} rounds:"
    )
    print(f"  {'server up (URL printed)':<28}{med['start']:.3f} s")
    rows = [
        ("first /api/runs", "runs", "load_all", "load_run of every run"),
        ("first samples page (cold)", "samples_cold", "parse", "json.loads of the file"),
        ("next samples page (warm)", "samples_warm", "parse", "json.loads of the file"),
        ("text search (warm)", "search", "parse", "json.loads of the file"),
    ]
    for label, key, base, what in rows:
        print(f"  {label:<28}{med[key]:.3f} s   ({med[key] / med[base]:.3f}x {what}: {med[base]:.3f} s)")
    print(f"  peak RSS of the server      {med['rss_mb']:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
