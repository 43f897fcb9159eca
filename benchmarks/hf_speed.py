"""evalflow vs lm-eval 0.4.13 on the same machine, model, data and batch size: throughput and memory.

    python benchmarks/hf_speed.py                          # all three workloads, 2 rounds each
    python benchmarks/hf_speed.py --only arc --rounds 3    # workloads whose name contains "arc"

Workloads (SmolLM2-135M fp32 on CPU, the local data, ``batch_size`` 8 on both sides):

- ``arc_easy``: 500 test documents, 0-shot (loglikelihood; goal 1.5x lm-eval's throughput);
- ``mmlu5``: 5 subjects, every test document, 5-shot: every document of a subject has the same
  five examples in front (goal 3x);
- ``gsm8k``: 20 documents, 5-shot, greedy generation (goal 1.0x).

Each side runs as its own command (lm-eval through ``../shared/parity/peer.sh``, evalflow through
``python -m evalflow``), from a cold cache every time (evalflow's cache folder is deleted before
each run; lm-eval runs without its request cache), timed by ``../shared/bench/measure.py``: it
waits for an idle machine before every run, interleaves the two commands, and records wall time,
peak RSS and how much CPU other processes took (``foreign``; above ~0.05 a figure is disturbed).

How the ratio is computed: both sides spend the same fixed time starting up, building tasks and
loading the model (the GGUF file is dequantized by transformers on both sides), which says nothing
about inference. So each workload is also run with ``limit=1`` (one document per task) as a
baseline, and

    throughput ratio = (lm-eval wall(full) - lm-eval wall(limit 1)) / (evalflow wall(full) - evalflow wall(limit 1))

i.e. lm-eval's time for the remaining documents over evalflow's, each from the minimum over
rounds. The plain total-wall ratio is printed too. Peak RSS is each side's largest process.

"Cold" means evalflow's response and stage cache is empty. Its memo of the dequantized GGUF
weights (``model.memo_gguf``, kept outside that folder) is warm after the first run, as it is for
a user: that shortens evalflow's load, so it shows in the total-wall ratio but not in throughput.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = (ROOT / ".." / "shared").resolve()
MEASURE = SHARED / "bench" / "measure.py"
PEER_SH = SHARED / "parity" / "peer.sh"
MMLU5 = ["mmlu_abstract_algebra", "mmlu_anatomy", "mmlu_astronomy", "mmlu_business_ethics", "mmlu_college_biology"]


@dataclass(frozen=True)
class Workload:
    name: str
    tasks: tuple[str, ...]
    num_fewshot: int
    limit: int | None  # None: every test document
    goal: float


WORKLOADS = [
    Workload("arc_easy", ("arc_easy",), 0, 500, 1.5),
    Workload("mmlu5", tuple(MMLU5), 5, None, 3.0),
    Workload("gsm8k", ("gsm8k",), 5, 20, 1.0),
]


def shell(command: str, work: Path) -> list[str]:
    """Run ``command`` with its output in ``work/log``: measure.py reads stderr only after the run
    ends, so a chatty command (lm-eval's progress bars) must not fill the pipe and stall."""
    work.mkdir(parents=True, exist_ok=True)
    return ["bash", "-c", f"{command} > {work / 'log'} 2>&1 || {{ tail -c 3000 {work / 'log'} >&2; exit 1; }}"]


def peer_command(w: Workload, limit: int | None, batch_size: int, work: Path) -> list[str]:
    args = ["--num_fewshot", str(w.num_fewshot), "--batch_size", str(batch_size)]
    args += ["--limit", str(limit)] if limit else []
    return shell(f"PEER_OUT={work / 'out'} bash {PEER_SH} {','.join(w.tasks)} {' '.join(args)}", work)


def evalflow_command(w: Workload, limit: int | None, batch_size: int, work: Path) -> list[str]:
    """Delete evalflow's cache folder, then run evalflow into it: a cold run every round."""
    cache, run = work / "cache", work / "run"
    tasks = w.tasks[0] if len(w.tasks) == 1 else "[" + ",".join(w.tasks) + "]"
    args = [f"task={tasks}", "model=smollm2", "data_map=shared", f"num_fewshot={w.num_fewshot}",
            f"batch_size={batch_size}", f"cache_dir={cache}", f"hydra.run.dir={run}", "bootstrap_iters=0"]
    args += [f"limit={limit}"] if limit else []
    python = f"cd {ROOT} && rm -rf {cache} {run} && PYTHONPATH={ROOT} {sys.executable} -m evalflow"
    return shell(" ".join([python, *(f"'{a}'" for a in args)]), work)


def measure(a: list[str], b: list[str], rounds: int, label: str) -> dict:
    """measure.py's summary of A (evalflow) against B (lm-eval)."""
    cmd = [sys.executable, str(MEASURE), "--rounds", str(rounds), "--label", label, "--", *a, "--vs", "--", *b]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    for line in proc.stdout.strip().splitlines()[:-1]:
        print(f"    {line}", flush=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{label} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_workload(w: Workload, batch_size: int, rounds: int, work: Path) -> str:
    print(f"{w.name}: full run", flush=True)
    full = measure(evalflow_command(w, w.limit, batch_size, work / "ef"),
                   peer_command(w, w.limit, batch_size, work / "peer"), rounds, f"{w.name} full")
    print(f"{w.name}: baseline (limit=1: start-up, task building, model load)", flush=True)
    base = measure(evalflow_command(w, 1, batch_size, work / "ef1"),
                   peer_command(w, 1, batch_size, work / "peer1"), rounds, f"{w.name} limit=1")
    ours, theirs = full["summary"]["A"], full["summary"]["B"]
    ours1, theirs1 = base["summary"]["A"], base["summary"]["B"]
    work_ours = ours["min_wall_s"] - ours1["min_wall_s"]
    work_theirs = theirs["min_wall_s"] - theirs1["min_wall_s"]
    ratio = work_theirs / work_ours if work_ours > 0 else float("inf")
    rss = ours["max_rss_mib"] / theirs["max_rss_mib"]
    foreign = max(ours["max_foreign_frac"], theirs["max_foreign_frac"], ours1["max_foreign_frac"], theirs1["max_foreign_frac"])
    return (
        f"{w.name}: throughput {ratio:.2f}x lm-eval's (goal {w.goal}x: {'met' if ratio >= w.goal else 'NOT met'}); "
        f"inference work lm-eval {work_theirs:.1f} s, evalflow {work_ours:.1f} s; start-up+load lm-eval "
        f"{theirs1['min_wall_s']:.1f} s, evalflow {ours1['min_wall_s']:.1f} s; total wall "
        f"{theirs['min_wall_s'] / ours['min_wall_s']:.2f}x; peak RSS evalflow {ours['max_rss_mib']:.0f} MiB, "
        f"lm-eval {theirs['max_rss_mib']:.0f} MiB ({rss:.2f}x, goal <= 1); worst foreign CPU {foreign:.2f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="run the workloads whose name contains this text")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    lines = []
    with tempfile.TemporaryDirectory(prefix="hf_speed_") as tmp:
        for w in [w for w in WORKLOADS if args.only in w.name]:
            lines.append(run_workload(w, args.batch_size, args.rounds, Path(tmp) / w.name))
            print(lines[-1], flush=True)
    print("\n".join(["", f"batch_size={args.batch_size}, rounds={args.rounds}:", *lines]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
