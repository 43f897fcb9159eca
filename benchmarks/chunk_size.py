"""Chunk sizing, before vs after: SmolLM2 on arc_easy (500 docs, 0-shot) and mmlu (5 subjects, 5-shot).

    python benchmarks/chunk_size.py                       # before = main's merge base, after = this tree
    python benchmarks/chunk_size.py --before REF --rounds 2 --wait-idle 20

"Before" is the evalflow source at git REF (extracted to a temporary folder), "after" this
worktree; both run the same command on a cold cache, interleaved before/after in every round so
machine load drifts over both alike. For each run it records the wall time and, from the run's
manifest, the inference throughput (requests / ``answering_seconds``: model time only, so start-up
and data loading do not dilute the comparison). Prints the minimum over rounds of each, and the
ratios after/before. Waits up to ``--wait-idle`` seconds for an idle machine before each run
(benchmarks/measure.py) and prints the CPU share other processes took during each run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
import measure  # noqa: E402
from checkouts import MMLU5, cold_command, source_at  # noqa: E402

WORKLOADS = {
    "arc_easy": ["task=arc_easy", "num_fewshot=0", "limit=500"],
    "mmlu5": [f"task={MMLU5}", "num_fewshot=5"],
}


def throughput(work: Path) -> float:
    manifest = json.loads((work / "run" / "manifest.json").read_text())
    return manifest["inference"]["computed"] / max(manifest["answering_seconds"], 1e-9)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default="befd488")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--wait-idle", type=float, default=20.0)
    parser.add_argument("--workloads", default="arc_easy,mmlu5")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="evalflow-chunks-"))
    trees = {"before": source_at(args.before, tmp / "before" / "evalflow"), "after": ROOT}
    summary = {}
    for name in args.workloads.split(","):
        runs: dict[str, list[dict]] = {"before": [], "after": []}
        for r in range(args.rounds):
            for side, tree in trees.items():
                work = tmp / "work" / name / side
                waited = measure.wait_idle(args.wait_idle)
                res = measure.run_once(cold_command(tree, WORKLOADS[name], work))
                if res["rc"]:
                    print(f"{name} {side} failed: {res['stderr_tail']}", file=sys.stderr)
                    return 1
                res.update(waited_s=round(waited, 1), requests_per_s=round(throughput(work), 2))
                runs[side].append(res)
                print(
                    f"round {r + 1} {name} {side}: wall {res['wall_s']:.1f}s, {res['requests_per_s']:.1f} req/s, "
                    f"foreign {res['foreign_frac']:.2f}",
                    flush=True,
                )
        best = {
            s: {"min_wall_s": min(x["wall_s"] for x in v), "max_requests_per_s": max(x["requests_per_s"] for x in v)}
            for s, v in runs.items()
        }
        summary[name] = {"runs": runs, "best": best}
        print(
            f"{name}: wall before {best['before']['min_wall_s']:.1f}s after {best['after']['min_wall_s']:.1f}s "
            f"({best['before']['min_wall_s'] / best['after']['min_wall_s']:.2f}x); inference "
            f"{best['before']['max_requests_per_s']:.1f} -> {best['after']['max_requests_per_s']:.1f} req/s "
            f"({best['after']['max_requests_per_s'] / best['before']['max_requests_per_s']:.2f}x)",
            flush=True,
        )
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
