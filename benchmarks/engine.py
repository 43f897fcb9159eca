"""The engine's own overhead: evalflow vs lm-eval 0.4.13 with an instant model on all of mmlu.

    python benchmarks/engine.py                      # 2 rounds, waits up to 60 s for an idle machine
    python benchmarks/engine.py --rounds 3 --wait-idle 120

Workload: mmlu, all 57 subjects, 5-shot, every test document (14,042 documents, 56,168
loglikelihood requests), samples files written by both. evalflow runs ``model=dummy``; lm-eval
runs its ``--model dummy`` through ``../shared/parity/peer.sh mmlu_local`` (lm-eval's own mmlu
YAML on the same local data). Four commands, interleaved in every round so machine drift hits
them alike:

- evalflow cold: an empty cache folder;
- evalflow cached: the cache a first run filled (every stage and the samples text are hits);
- lm-eval cold: no cache;
- lm-eval cached: ``--use_cache DB --cache_requests true`` on the database and request cache a
  first run filled (``LM_HARNESS_CACHE_PATH`` points the request cache at a private folder).

Prints each run's wall and CPU seconds (user + system of the whole process tree) and the CPU
share other processes took meanwhile (``foreign``; above ~0.05 the machine was not idle), then the
ratios lm-eval / evalflow of the minimum wall time (the figure of issue 24: goals cold >= 10x,
cached >= 25x) and of the minimum CPU time (steadier on a loaded machine). Never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/measure.py
import measure  # noqa: E402
from checkouts import source_at  # noqa: E402


def evalflow_command(cache: Path, run: Path, tree: Path = ROOT) -> list[str]:
    args = [
        "model=dummy",
        "task=mmlu",
        "num_fewshot=5",
        "data_map=shared",
        f"cache_dir={cache}",
        f"hydra.run.dir={run}",
    ]
    return [
        "bash",
        "-c",
        f"rm -rf {run} && cd {tree} && PYTHONPATH={tree} {sys.executable} -m evalflow " + " ".join(args),
    ]


def lm_eval_command(work: Path, cached: bool) -> list[str]:
    flags = f"--use_cache {work / 'db'} --cache_requests true" if cached else ""
    env = f"LM_HARNESS_CACHE_PATH={work / 'requests'} PEER_OUT={work / 'out'}"
    return [
        "bash",
        "-c",
        f"rm -rf {work / 'out'} && {env} bash {SHARED / 'parity' / 'peer.sh'} mmlu_local "
        f"--num_fewshot 5 --model dummy {flags}",
    ]


def run_once(cmd: list[str]) -> dict:
    """Wall and CPU seconds of ``cmd`` and its descendants, and the CPU other processes used."""
    with tempfile.TemporaryFile("w+") as log:  # a file, not a pipe: lm-eval's logging would fill a pipe and block
        b0, t0 = measure.busy_seconds(), time.time()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, text=True)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.time() - t0
        log.seek(0)
        err = log.read()
    cpu = ru.ru_utime + ru.ru_stime
    foreign = max(0.0, measure.busy_seconds() - b0 - cpu) / (wall * measure.NCPU)
    rc = os.waitstatus_to_exitcode(status)
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "foreign_frac": round(foreign, 3),
        "rc": rc,
        "stderr_tail": err[-600:] if rc else "",
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--wait-idle", type=float, default=60.0)
    parser.add_argument(
        "--before", help="also time evalflow at this git ref, or in this folder (before/after a change)"
    )
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="evalflow-engine-"))
    commands = {
        "evalflow cold": lambda: (
            shutil.rmtree(tmp / "ef-cold", ignore_errors=True),
            evalflow_command(tmp / "ef-cold", tmp / "ef-cold-run"),
        )[1],
        "evalflow cached": lambda: evalflow_command(tmp / "ef-warm", tmp / "ef-warm-run"),
        "lm-eval cold": lambda: lm_eval_command(tmp / "lm-cold", cached=False),
        "lm-eval cached": lambda: lm_eval_command(tmp / "lm-warm", cached=True),
    }
    if args.before:
        old = Path(args.before) if Path(args.before).is_dir() else source_at(args.before, tmp / "before" / "evalflow")
        commands["before cold"] = lambda: (
            shutil.rmtree(tmp / "old-cold", ignore_errors=True),
            evalflow_command(tmp / "old-cold", tmp / "old-cold-run", old),
        )[1]
        commands["before cached"] = lambda: evalflow_command(tmp / "old-warm", tmp / "old-warm-run", old)
    for name in [n for n in commands if "cached" in n]:  # fill the caches the cached runs read
        first = run_once(commands[name]())
        if first["rc"]:
            print(f"{name} (filling its cache) failed: {first['stderr_tail']}", file=sys.stderr)
            return 1
    runs: dict[str, list[dict]] = {name: [] for name in commands}
    for r in range(args.rounds):
        for name, make in commands.items():
            waited = measure.wait_idle(args.wait_idle)
            res = run_once(make())
            res["waited_s"] = round(waited, 1)
            runs[name].append(res)
            print(
                f"round {r + 1} {name}: wall {res['wall_s']:.1f}s cpu {res['cpu_s']:.1f}s "
                f"foreign {res['foreign_frac']:.2f} rc {res['rc']}",
                flush=True,
            )
            if res["rc"]:
                print(f"  failed: {res['stderr_tail']}", file=sys.stderr)
                return 1
    best = {name: {k: min(x[k] for x in v) for k in ("wall_s", "cpu_s")} for name, v in runs.items()}
    for kind, goal in (("cold", 10), ("cached", 25)):
        ours, theirs = best[f"evalflow {kind}"], best[f"lm-eval {kind}"]
        print(
            f"{kind}: evalflow {ours['wall_s']:.1f}s wall / {ours['cpu_s']:.1f}s cpu, "
            f"lm-eval {theirs['wall_s']:.1f}s / {theirs['cpu_s']:.1f}s: "
            f"{theirs['wall_s'] / ours['wall_s']:.1f}x wall (goal {goal}x), "
            f"{theirs['cpu_s'] / ours['cpu_s']:.1f}x cpu"
        )
    if args.before:
        for kind in ("cold", "cached"):
            before, after = best[f"before {kind}"], best[f"evalflow {kind}"]
            print(
                f"evalflow {kind} before ({args.before}) / after: {before['wall_s'] / after['wall_s']:.2f}x "
                f"wall, {before['cpu_s'] / after['cpu_s']:.2f}x cpu"
            )
    print(json.dumps({"runs": runs, "best": best}))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
