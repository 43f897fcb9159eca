"""What saving answers batch by batch costs a cold run (issue 38 item 2): after/before wall time.

    python benchmarks/persist_cost.py                     # before = 2878b90 (chunks saved whole)
    python benchmarks/persist_cost.py --before REF --rounds 3 --wait-idle 20

"Before" is the evalflow source at git REF (extracted to a temporary folder, with ``../shared``
beside it, which ``data_map=shared`` resolves against), "after" this worktree. Both run the same
SmolLM2 command on a fresh cache folder, interleaved before/after in every round so machine load
drifts over both alike: arc_easy 0-shot (500 docs, 2,000 requests, four 512-request chunks) and
mmlu 5-shot (5 subjects, 20 docs each). Prints each run's wall time and the CPU share other
processes took during it (benchmarks/measure.py), the after/before ratio of the minimum wall
times, and the CPU model and flags. The target is a ratio of at most 1.02.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import measure  # benchmarks/measure.py (benchmarks/ is on sys.path when run as a script)
from checkouts import MMLU5, ROOT, cold_command, source_at

WORKLOADS = {
    "arc_easy": ["task=arc_easy", "num_fewshot=0", "limit=500"],
    "mmlu5": [f"task={MMLU5}", "num_fewshot=5", "limit=20"],
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default="2878b90")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--wait-idle", type=float, default=20.0)
    parser.add_argument("--workloads", default="arc_easy,mmlu5")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="evalflow-persist-"))
    trees = {"before": source_at(args.before, tmp / "before" / "evalflow"), "after": ROOT}
    print(f"cpu: {measure.cpu_description()}", flush=True)
    summary = {}
    for name in args.workloads.split(","):
        walls: dict[str, list[float]] = {"before": [], "after": []}
        for r in range(args.rounds):
            for side, tree in trees.items():
                waited = measure.wait_idle(args.wait_idle)
                res = measure.run_once(cold_command(tree, WORKLOADS[name], tmp / "work" / name / side))
                if res["rc"]:
                    print(f"{name} {side} failed: {res['stderr_tail']}", file=sys.stderr)
                    return 1
                walls[side].append(res["wall_s"])
                print(
                    f"round {r + 1} {name} {side}: wall {res['wall_s']:.1f}s, foreign CPU {res['foreign_frac']:.2f}, "
                    f"waited {waited:.0f}s for idle",
                    flush=True,
                )
        ratio = min(walls["after"]) / min(walls["before"])
        summary[name] = {"walls": walls, "after_over_before": round(ratio, 4)}
        print(
            f"{name}: wall before {min(walls['before']):.1f}s after {min(walls['after']):.1f}s, "
            f"after/before {ratio:.3f}",
            flush=True,
        )
    print(json.dumps({"cpu": measure.cpu_description(), **summary}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
