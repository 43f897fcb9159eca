"""evalflow vs lm-eval 0.4.13 on the same machine, model, data and batch size: throughput and memory.

    python benchmarks/hf_speed.py                          # all workloads, 2 rounds each
    python benchmarks/hf_speed.py --only arc --rounds 3    # workloads whose name contains "arc"
    python benchmarks/hf_speed.py --only decode            # the decode loop alone, in this process
    python benchmarks/hf_speed.py --only gsm8k --ablate model.draft_tokens=0  # one setting's worth
    python benchmarks/hf_speed.py --only arc --before 0f40239  # this tree against an earlier one

Workloads (SmolLM2-135M fp32 on CPU, the local data, evalflow at ``batch_size`` 8):

(Goals as issue 24 restated them against what fp32 arithmetic allows on this machine, measured
floors: arc_easy ~3.1x, mmlu ~8x, gsm8k 2.68x.)

- ``arc_easy``: 500 test documents, 0-shot (loglikelihood; goal 2.5x lm-eval's throughput);
- ``mmlu5``: 5 subjects, every test document, 5-shot: every document of a subject has the same
  five examples in front (goal 6.5x);
- ``gsm8k``: 30 documents, 5-shot, greedy generation, against the better of lm-eval at batch size 1
  and 8 (goal 2.4x). Its five examples are drawn at random per document, so no two prompts share a
  prefix: every prompt is run whole, on both sides;
- ``cot``: ``gsm8k_cot``, 30 documents, its 8 fixed chain-of-thought exemplars in front of every
  question, greedy, against lm-eval's better of batch size 1 and 8 (no goal: it shows the case of a
  prefix every request shares, run once and read once per decode step);
- ``decode``: tokens/s of the decode loop alone (each measurement minus the same call generating
  one token, so prompt processing cancels out), evalflow's continuous-batching loop
  (``evalflow.models.hf.fast.decode``) against a plain ``model.generate``, at 1 and 8 rows, on gsm8k
  5-shot contexts; wall and CPU seconds and the foreign CPU load during the measurement.

Each side of the first three runs as its own command (lm-eval through ``../shared/parity/peer.sh``,
evalflow through ``python -m evalflow``), from a cold cache every time (evalflow's cache folder is
deleted before each run; lm-eval runs without its request cache), timed by
``benchmarks/measure.py``: it waits for an idle machine before every run, interleaves the two
commands, and records wall time, peak RSS and how much CPU other processes took (``foreign``; above
~0.05 a figure is disturbed).

How the ratio is computed: both sides spend the same fixed time starting up, building tasks and
loading the model (the GGUF file is dequantized by transformers on both sides), which says nothing
about inference. So each workload is also run with ``limit=1`` (one document per task) as a
baseline, and

    throughput ratio = (lm-eval wall(full) - lm-eval wall(limit 1)) / (evalflow wall(full) - evalflow wall(limit 1))

i.e. lm-eval's time for the remaining documents over evalflow's, each from the minimum over
rounds (for gsm8k, lm-eval's better batch size). The plain total-wall ratio is printed too. Peak
RSS is each side's largest process.

"Cold" means evalflow's response and stage cache is empty. Its memo of the dequantized GGUF
weights (``model.memo_gguf``, kept outside that folder) is warm after the first run, as it is for
a user: that shortens evalflow's load, so it shows in the total-wall ratio but not in throughput.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from checkouts import source_at  # benchmarks/ is on sys.path when run as a script
from measured import measure

ROOT = Path(__file__).resolve().parents[1]
SHARED = (ROOT / ".." / "shared").resolve()
PEER_SH = SHARED / "parity" / "peer.sh"
MMLU5 = ["mmlu_abstract_algebra", "mmlu_anatomy", "mmlu_astronomy", "mmlu_business_ethics", "mmlu_college_biology"]


@dataclass(frozen=True)
class Workload:
    name: str
    tasks: tuple[str, ...]
    num_fewshot: int
    limit: int | None  # None: every test document
    goal: float | None  # None: measured for information
    peer_batch_sizes: tuple[int, ...] = ()  # lm-eval's best of these; () = evalflow's batch size


WORKLOADS = [
    Workload("arc_easy", ("arc_easy",), 0, 500, 2.5),
    Workload("mmlu5", tuple(MMLU5), 5, None, 6.5),
    Workload("gsm8k", ("gsm8k",), 5, 30, 2.4, peer_batch_sizes=(8, 1)),
    Workload("cot", ("gsm8k_cot",), 8, 30, None, peer_batch_sizes=(8, 1)),
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


def evalflow_command(
    w: Workload, limit: int | None, batch_size: int, work: Path, extra: tuple[str, ...] = (), tree: Path = ROOT
) -> list[str]:
    """Delete evalflow's cache folder, then run ``tree``'s evalflow into it (with the ``extra``
    overrides): a cold run every round."""
    cache, run = work / "cache", work / "run"
    tasks = w.tasks[0] if len(w.tasks) == 1 else "[" + ",".join(w.tasks) + "]"
    args = [
        f"task={tasks}",
        "model=smollm2",
        "data_map=shared",
        f"num_fewshot={w.num_fewshot}",
        f"batch_size={batch_size}",
        f"cache_dir={cache}",
        f"hydra.run.dir={run}",
        "bootstrap_iters=0",
    ]
    args += [f"limit={limit}"] if limit else []
    args += list(extra)
    python = f"cd {tree} && rm -rf {cache} {run} && PYTHONPATH={tree} {sys.executable} -m evalflow"
    return shell(" ".join([python, *(f"'{a}'" for a in args)]), work)


def run_workload(w: Workload, batch_size: int, rounds: int, work: Path) -> str:
    peer_sizes = w.peer_batch_sizes or (batch_size,)
    print(f"{w.name}: full run", flush=True)
    full = measure(
        evalflow_command(w, w.limit, batch_size, work / "ef"),
        peer_command(w, w.limit, peer_sizes[0], work / "peer"),
        rounds,
        f"{w.name} full",
    )
    print(f"{w.name}: baseline (limit=1: start-up, task building, model load)", flush=True)
    base = measure(
        evalflow_command(w, 1, batch_size, work / "ef1"),
        peer_command(w, 1, peer_sizes[0], work / "peer1"),
        rounds,
        f"{w.name} limit=1",
    )
    ours, ours1 = full["summary"]["A"], base["summary"]["A"]
    peers = [(peer_sizes[0], full["summary"]["B"], base["summary"]["B"])]
    for size in peer_sizes[1:]:  # lm-eval alone at its other batch sizes
        print(f"{w.name}: lm-eval at batch size {size}", flush=True)
        alone = measure_one(
            peer_command(w, w.limit, size, work / f"peer_b{size}"), rounds, f"{w.name} lm-eval bs={size}"
        )
        alone1 = measure_one(
            peer_command(w, 1, size, work / f"peer1_b{size}"), rounds, f"{w.name} lm-eval bs={size} limit=1"
        )
        peers.append((size, alone, alone1))
    work_ours = ours["min_wall_s"] - ours1["min_wall_s"]
    size, theirs, theirs1 = min(peers, key=lambda p: p[1]["min_wall_s"] - p[2]["min_wall_s"])
    work_theirs = theirs["min_wall_s"] - theirs1["min_wall_s"]
    ratio = work_theirs / work_ours if work_ours > 0 else float("inf")
    rss = ours["max_rss_mib"] / max(p[1]["max_rss_mib"] for p in peers)
    foreign = max(x["max_foreign_frac"] for x in (ours, ours1, *(q for p in peers for q in p[1:])))
    verdict = "no goal" if w.goal is None else f"goal {w.goal}x: {'met' if ratio >= w.goal else 'NOT met'}"
    return (
        f"{w.name}: throughput {ratio:.3f}x lm-eval's ({verdict}); "
        f"inference work lm-eval {work_theirs:.1f} s (batch size {size}), evalflow {work_ours:.1f} s; start-up+load "
        f"lm-eval {theirs1['min_wall_s']:.1f} s, evalflow {ours1['min_wall_s']:.1f} s; total wall "
        f"{theirs['min_wall_s'] / ours['min_wall_s']:.2f}x; peak RSS evalflow {ours['max_rss_mib']:.0f} MiB, "
        f"lm-eval {max(p[1]['max_rss_mib'] for p in peers):.0f} MiB ({rss:.2f}x, goal <= 1); "
        f"worst foreign CPU {foreign:.2f}"
    )


def paired_workload(
    w: Workload, batch_size: int, rounds: int, work: Path, other: str, tree: Path, extra: tuple[str, ...]
) -> str:
    """evalflow as it is against ``other`` (``tree``'s evalflow with the ``extra`` overrides),
    interleaved in the same rounds: what one setting or one change is worth, free of the machine's
    drift between separate runs."""
    ratios = []
    for limit in (w.limit, 1):
        print(f"{w.name}: evalflow vs {other}, limit={limit}", flush=True)
        ratios.append(
            measure(
                evalflow_command(w, limit, batch_size, work / f"a{limit}"),
                evalflow_command(w, limit, batch_size, work / f"b{limit}", extra, tree),
                rounds,
                f"{w.name} {other} limit={limit}",
            )["summary"]
        )
    (full, one) = ratios
    as_is = full["A"]["min_wall_s"] - one["A"]["min_wall_s"]
    changed = full["B"]["min_wall_s"] - one["B"]["min_wall_s"]
    foreign = max(x[k]["max_foreign_frac"] for x in ratios for k in ("A", "B"))
    return (
        f"{w.name}: inference work evalflow {as_is:.1f} s, {other} {changed:.1f} s: {changed / as_is:.2f}x the time; "
        f"start-up+load {one['A']['min_wall_s']:.1f} s against {one['B']['min_wall_s']:.1f} s; "
        f"worst foreign CPU {foreign:.2f}"
    )


def measure_one(a: list[str], rounds: int, label: str) -> dict:
    """measure.py's summary of one command alone."""
    return measure(a, None, rounds, label)["summary"]["A"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="run the workloads whose name contains this text")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument(
        "--ablate",
        metavar="OVERRIDE",
        help="instead of lm-eval, time evalflow against itself "
        "with this Hydra override (e.g. model.draft_tokens=0), interleaved in the same rounds",
    )
    parser.add_argument(
        "--before",
        metavar="REF",
        help="instead of lm-eval, time evalflow against the evalflow of this git ref "
        "(benchmarks/checkouts.py extracts it), interleaved in the same rounds",
    )
    args = parser.parse_args()
    lines = []
    with tempfile.TemporaryDirectory(prefix="hf_speed_") as tmp:
        before = source_at(args.before, Path(tmp) / "before" / "evalflow") if args.before else None
        for w in [w for w in WORKLOADS if args.only in w.name]:
            work = Path(tmp) / w.name
            if args.ablate:
                lines.append(paired_workload(w, args.batch_size, args.rounds, work, args.ablate, ROOT, (args.ablate,)))
            elif before is not None:
                lines.append(
                    paired_workload(w, args.batch_size, args.rounds, work, f"evalflow {args.before}", before, ())
                )
            else:
                lines.append(run_workload(w, args.batch_size, args.rounds, work))
            print(lines[-1], flush=True)
    if args.only in "decode" and not (args.ablate or args.before):
        sys.path.insert(0, str(ROOT))  # this checkout's evalflow, as the commands above run it
        from decode_speed import decode_report  # benchmarks/ is on sys.path when run as a script

        lines.extend(decode_report(args.rounds))
    print("\n".join(["", f"batch_size={args.batch_size}, rounds={args.rounds}:", *lines]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
