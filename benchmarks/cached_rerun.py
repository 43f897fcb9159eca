"""Cold run vs fully cached re-run of one command on a 1,000-document multiple-choice task.

    python benchmarks/cached_rerun.py                  # dummy model (measures the engine)
    python benchmarks/cached_rerun.py --model smollm2  # the real 135M model (cold takes minutes)

The task is a synthetic 1,000-document, 4-choice task written to a temp folder. Both commands are
the same `python -m evalflow ...`; "cold" starts from an empty cache every round, "warm" from the
cache the cold runs filled. Prints wall times, the ratio, and whether the warm run is under the 2 s
goal. Uses benchmarks/measure.py (waits for an idle machine, interleaves the runs).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
import measure  # noqa: E402

TASK = """\
task: bench_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: label
doc_to_choice: "{{{{choices}}}}"
metric_list:
  - metric: acc
  - metric: acc_norm
"""


def write_task(folder: Path, n: int = 1000) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        a, b = i % 97 + 1, i % 89 + 3
        options = [str(a + b + d) for d in range(4)]
        label = i % 4
        options[0], options[label] = options[label], options[0]
        rows.append({"question": f"What is {a} plus {b}?", "label": label, "choices": options})
    data = folder / "bench_mc.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "bench_mc.yaml").write_text(TASK.format(data=data))
    return folder


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="dummy")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="evalflow-bench-"))
    lib = write_task(tmp / "tasks")
    warm_cache, cold_cache = tmp / "warm", tmp / "cold"
    cmd = [
        sys.executable,
        "-m",
        "evalflow",
        f"model={args.model}",
        "task=bench_mc",
        f"include_path=[{lib}]",
        "batch_size=16",
        f"hydra.run.dir={tmp / 'run'}",
    ]
    cold = ["bash", "-c", f"rm -rf {cold_cache} && cd {ROOT} && " + " ".join(cmd + [f"cache_dir={cold_cache}"])]
    warm = ["bash", "-c", f"cd {ROOT} && " + " ".join(cmd + [f"cache_dir={warm_cache}"])]
    first = measure.run_once(warm)  # fills the warm cache
    if first["rc"]:
        print(first["stderr_tail"])
        return 1
    runs = {"cold": [], "warm": []}
    for _ in range(args.rounds):
        for name, command in (("cold", cold), ("warm", warm)):
            measure.wait_idle(60)
            runs[name].append(measure.run_once(command))
    best = {k: min(r["wall_s"] for r in v) for k, v in runs.items()}
    print(f"model={args.model}, 1000 docs x 4 choices")
    print(f"cold run:   {best['cold']:.2f} s   (min of {args.rounds})")
    print(
        f"cached run: {best['warm']:.2f} s   "
        f"(min of {args.rounds}; goal < 2 s: {'met' if best['warm'] < 2 else 'NOT met'})"
    )
    print(f"ratio cold/cached: {best['cold'] / best['warm']:.1f}x")
    print(json.dumps({"runs": runs, "best": best}))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
