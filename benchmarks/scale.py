"""Data-parallel inference on Ray: workers=2 (one torch thread each) against workers=1 (one thread).

    python benchmarks/scale.py                  # 2 rounds
    python benchmarks/scale.py --rounds 3 --limit 200

Workload: SmolLM2-135M fp32 on CPU, arc_easy from ../shared/data, 200 documents 0-shot (800
loglikelihood requests), batch size 8, chunk_size 64, on this 2-core machine. Both sides run
``python -m evalflow`` from a cold cache every round (the folder is deleted first), timed by
``benchmarks/measure.py``, which waits for an idle machine before each run, interleaves the
two commands and reports how much CPU other processes took (``foreign``; above ~0.05 a figure is
disturbed: the machine is shared).

Fixed costs are not inference: both sides start up, index tasks and load the model, and
``workers=2`` also starts a local Ray and loads the model in each actor. Each run's manifest
records ``answering_seconds``, the wall time during which some replica was answering requests
(the union of the chunks' answering intervals, seen from the driver), so

    inference throughput ratio = answering_seconds(workers=1) / answering_seconds(workers=2)
    scaling efficiency = ratio / 2          (goal >= 0.85, i.e. ratio >= 1.7)
    Ray's fixed cost  = wall(workers=2, limit=1) - wall(workers=1, limit=1)

each from the best round. As a cross-check the script also prints the ratio of wall-time
differences, (wall(full) - wall(limit=1)) per side: it counts the same work but inherits the noise
of Ray's start-up (a local Ray with two actors loading the model is ready in 9 to 13 s here, so one
slow start moves that figure by a third). measure.py follows the command's process tree, and
Ray's actors run under Ray's own processes (raylet): so peak RSS is the driver's only, and the
actors' CPU counts as *foreign* in the workers=2 runs; the workers=1 runs' foreign figure is the
one that tells how loaded the machine was.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from measured import measure  # benchmarks/measured.py (benchmarks/ is on sys.path when run as a script)

ROOT = Path(__file__).resolve().parents[1]


def command(workers: int, limit: int, work: Path) -> list[str]:
    """A cold run (cache folder deleted first), its output in work/log, its manifest kept as
    work/manifest-<ns>.json."""
    cache, run = work / "cache", work / "run"
    args = [
        "model=smollm2",
        "model.threads=1",
        "task=arc_easy",
        "data_map=shared",
        "num_fewshot=0",
        f"limit={limit}",
        "batch_size=8",
        "chunk_size=64",
        f"workers={workers}",
        "worker_resources={num_cpus: 1}",
        f"cache_dir={cache}",
        f"hydra.run.dir={run}",
        "bootstrap_iters=0",
    ]
    work.mkdir(parents=True, exist_ok=True)
    line = " ".join(
        [
            f"cd {ROOT} && rm -rf {cache} {run} && PYTHONPATH={ROOT} {sys.executable} -m evalflow",
            *(f"'{a}'" for a in args),
        ]
    )
    keep = f"cp {run / 'manifest.json'} {work}/manifest-$(date +%s%N).json"
    return ["bash", "-c", f"{line} > {work / 'log'} 2>&1 && {keep} || {{ tail -c 3000 {work / 'log'} >&2; exit 1; }}"]


def best_answering(work: Path) -> tuple[float, int]:
    """The shortest answering window over this side's rounds, and its request count."""
    runs = [json.loads(f.read_text()) for f in sorted(work.glob("manifest-*.json"))]
    top = min(runs, key=lambda m: m["answering_seconds"])
    return top["answering_seconds"], top["inference"]["computed"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--limit", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="scale_") as tmp:
        work = Path(tmp)
        print(f"full runs: arc_easy limit={args.limit}, workers=2 (A) vs workers=1 (B)", flush=True)
        full = measure(command(2, args.limit, work / "w2"), command(1, args.limit, work / "w1"), args.rounds, "full")
        print("baselines: limit=1 (start-up, Ray start, model loads)", flush=True)
        base = measure(command(2, 1, work / "w2b"), command(1, 1, work / "w1b"), args.rounds, "limit=1")
        answer2, n2 = best_answering(work / "w2")
        answer1, n1 = best_answering(work / "w1")
    assert n1 == n2, f"the two sides computed different request counts: {n1} vs {n2}"
    two, one = full["summary"]["A"], full["summary"]["B"]
    two1, one1 = base["summary"]["A"], base["summary"]["B"]
    work2, work1 = two["min_wall_s"] - two1["min_wall_s"], one["min_wall_s"] - one1["min_wall_s"]
    ratio = answer1 / answer2
    cross = work1 / work2 if work2 > 0 else float("inf")
    foreign = max(s["max_foreign_frac"] for s in (one, one1))  # workers=2's includes its own actors
    print(
        f"\ninference throughput workers=2 vs workers=1: {ratio:.2f}x "
        f"(scaling efficiency {ratio / 2:.2f}, goal >= 0.85: {'met' if ratio >= 1.7 else 'NOT met'}); "
        f"{n1} requests answered in {answer1:.1f} s (workers=1) "
        f"vs {answer2:.1f} s (workers=2): {n1 / answer1:.1f} vs {n2 / answer2:.1f} requests/s\n"
        f"cross-check from wall-time differences (full - limit=1): workers=1 {work1:.1f} s, workers=2 {work2:.1f} s, "
        f"ratio {cross:.2f}x\n"
        f"Ray's fixed cost (local Ray start + a model load per actor, beyond workers=1's start-up): "
        f"{two1['min_wall_s'] - one1['min_wall_s']:.1f} s (limit=1 wall: workers=2 {two1['min_wall_s']:.1f} s, "
        f"workers=1 {one1['min_wall_s']:.1f} s)\n"
        f"peak RSS of the driver (Ray actors not seen) workers=2 {two['max_rss_mib']:.0f} MiB, "
        f"workers=1 {one['max_rss_mib']:.0f} MiB; "
        f"worst foreign CPU in the workers=1 runs {foreign:.2f}; rounds={args.rounds}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
