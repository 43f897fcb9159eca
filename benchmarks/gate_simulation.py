"""The sequential release gate's error rates and documents used, proven by simulation (issue 53, item 5).

    python benchmarks/gate_simulation.py                 # 10,000 simulated paired runs per scenario
    python benchmarks/gate_simulation.py --quick         # 500 runs per scenario: a smoke test
    python benchmarks/gate_simulation.py --discordance 0.25 --first 64 --growth 2 --json out.json

A paired population is a vector of per-document differences (candidate - baseline) in {-1, 0, 1}
with a given discordance (the share of documents on which the two runs disagree; default 0.20,
inside the 0.15-0.30 that arc_easy SmolLM2 runs with changed prompts or shots disagree on) and an
exact population mean. Each simulated run is a uniformly random order of it, evaluated in rounds
(``evalflow.insight.sequential.round_sizes``) and decided after each round by the gate's own code,
``verdict_codes(*prefix_bounds(...))`` (what ``gate_verdict(mean_interval(...))`` is for one run);
a run still undecided when the units run out gets today's fixed-n verdict
(``evalflow.insight.gate.judge`` with the exact McNemar p over all documents).

A verdict is false when the claim it makes about the population is: "fail" (the drop exceeds the
margin) when the true drop is at most the margin; "pass" taken before the last document (the drop
is below the margin) when the true drop is at least the margin. At the boundary (true drop == margin)
both are false, so its false-verdict rate is the share of runs decided before the last document.
The fixed-n gate sees every document, which in a finite population is the population itself: its
verdict is the same on every run (0% or 100%), printed beside each scenario.

The clustered population has passages of 4-5 documents whose differences move together (a
passage is lost or won as a whole); it is gated three ways: clusters as units (the cluster key),
documents as units over a passage-by-passage order (passages evaluated together, no key), and
documents as units over a document order (no passages kept together).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy.stats import beta

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalflow.insight.gate import GateSettings, judge  # noqa: E402
from evalflow.insight.sequential import prefix_bounds, round_sizes, unit_scale, verdict_codes  # noqa: E402
from evalflow.insight.stats import mcnemar_exact  # noqa: E402

TASKS = {"arc_easy": 2376, "mmlu": 14042, "humaneval": 164}
BATCH = 2000  # simulated runs held in memory at once
PASSAGE_ORDER = "documents, passage order (no key)"  # shows the need for the key: not held to alpha


@dataclass(frozen=True)
class Population:
    """Per-unit sums and sizes (documents as units: every size 1) of one finite paired population."""

    sums: np.ndarray
    sizes: np.ndarray
    documents: np.ndarray  # each document's difference, units' documents together, in unit order
    order: str = "units"  # "units": a random order of the units; "passages": documents, passage by passage


@dataclass(frozen=True)
class Outcome:
    scenario: str
    task: str
    documents: int
    max_drop: float
    true_diff: float
    runs: int
    fail: float
    passed: float
    false_verdicts: float
    false_low: float
    false_high: float
    null: bool
    mean_fraction: float
    p90_fraction: float
    same_as_full_run: float
    fixed_verdict: str
    fixed_false: bool
    seconds: float


def paired(documents: int, discordance: float, drop_docs: int, rng: np.random.Generator) -> np.ndarray:
    """Differences in {-1, 0, 1}: ``drop_docs`` more losses than wins among the discordant ones."""
    discordant = max(round(discordance * documents), abs(drop_docs))
    discordant += (discordant - drop_docs) % 2  # losses - wins = drop_docs needs the same parity
    losses = (discordant + drop_docs) // 2
    diffs = np.zeros(documents, dtype=np.int8)
    diffs[:losses] = -1
    diffs[losses:discordant] = 1
    return rng.permutation(diffs)


def clustered(documents: int, discordance: float, drop_docs: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Passages of 4-5 documents lost or won whole (one passage cut to hit the exact counts)."""
    sizes = rng.integers(4, 6, size=documents // 4)
    sizes = sizes[np.cumsum(sizes) <= documents]
    sizes = np.append(sizes, documents - sizes.sum()) if sizes.sum() < documents else sizes
    discordant = max(round(discordance * documents), abs(drop_docs))
    discordant += (discordant - drop_docs) % 2
    losses, wins = (discordant + drop_docs) // 2, (discordant - drop_docs) // 2
    values = np.zeros(sizes.size, dtype=np.int64)
    docs = [np.zeros(int(s), dtype=np.int8) for s in sizes]
    passages = iter(rng.permutation(sizes.size))
    for sign, count in ((-1, losses), (1, wins)):
        while count > 0:
            c = next(passages)
            take = min(count, int(sizes[c]))
            docs[c][:take] = sign
            values[c] = sign * take
            count -= take
    return sizes, values, np.concatenate(docs)


def full_run(diffs: np.ndarray, gate: GateSettings) -> int:
    """Today's fixed-n gate over all documents: -1 fail, +1 pass (evalflow.insight.gate.judge)."""
    a = (diffs == -1).astype(int)  # a right and b wrong where the candidate lost
    b = (diffs == 1).astype(int)
    verdict = judge("row", float(diffs.mean()), True, mcnemar_exact(list(a), list(b)), gate)
    return -1 if verdict.failed else 1


def run_batch(
    sums: np.ndarray, sizes: np.ndarray, documents: int, gate: GateSettings, rounds: tuple[int, ...], fallback: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes (-1/+1), whether decided before the last unit, and documents used, per run (row)."""
    scale = unit_scale(sizes[0], (-1.0, 1.0))
    runs = sums.shape[0]
    codes = np.zeros(runs, dtype=np.int64)
    early = np.zeros(runs, dtype=bool)
    used = np.zeros(runs, dtype=np.int64)
    live = np.arange(runs)
    for n in rounds:
        seen = sizes[live, :n].sum(axis=1)
        if n == rounds[-1]:  # the units ran out: the full run's verdict (the gate's rule)
            codes[live], used[live] = fallback, seen
            break
        low, high = prefix_bounds(sums[live, :n], seen, scale, gate.alpha)
        now = verdict_codes(low, high, gate.max_drop)
        decided = now != 0
        codes[live[decided]], early[live[decided]], used[live[decided]] = now[decided], True, seen[decided]
        live = live[~decided]
        if not live.size:
            break
    return codes, early, used


def simulate(
    population: Population, runs: int, gate: GateSettings, first: int, growth: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``runs`` random orders of the population, each gated round by round."""
    rng = np.random.default_rng(seed)
    units = population.sums.size
    rounds = round_sizes(units, first, growth)
    docs = int(population.sizes.sum())
    fallback = full_run(population.documents, gate)
    parts = []
    for start in range(0, runs, BATCH):
        count = min(BATCH, runs - start)
        perm = rng.permuted(np.tile(np.arange(units), (count, 1)), axis=1)
        sums, sizes = population.sums[perm].astype(np.float64), population.sizes[perm]
        if population.order == "passages":  # documents as units, passage by passage
            sums = np.stack([expand(population, row) for row in perm]).astype(np.float64)
            sizes = np.ones_like(sums, dtype=np.int64)
            rounds = round_sizes(docs, first, growth)
        parts.append(run_batch(sums, sizes, docs, gate, rounds, fallback))
    return tuple(np.concatenate(p) for p in zip(*parts, strict=True))  # type: ignore[return-value]


def expand(population: Population, unit_order: np.ndarray) -> np.ndarray:
    """The documents' differences, passage after passage in ``unit_order``."""
    docs = population.documents
    starts = np.concatenate([[0], np.cumsum(population.sizes)[:-1]])
    return np.concatenate([docs[starts[u] : starts[u] + population.sizes[u]] for u in unit_order])


def summarize(
    scenario: str,
    task: str,
    population: Population,
    gate: GateSettings,
    runs: int,
    first: int,
    growth: float,
    seed: int,
) -> Outcome:
    """One scenario's numbers (see the module docstring for what a false verdict is)."""
    started = time.perf_counter()
    codes, early, used = simulate(population, runs, gate, first, growth, seed)
    diffs = population.documents
    docs = diffs.size
    true_diff = float(diffs.sum()) / docs
    at_most = true_diff >= -gate.max_drop - 1e-12
    false = ((codes == -1) & at_most) | ((codes == 1) & early & (true_diff <= -gate.max_drop + 1e-12))
    count = int(false.sum())
    low = float(beta.ppf(0.025, count, runs - count + 1)) if count else 0.0
    high = float(beta.ppf(0.975, count + 1, runs - count)) if count < runs else 1.0
    fixed = full_run(diffs, gate)
    fraction = used / docs
    return Outcome(
        scenario, task, docs, gate.max_drop, true_diff, runs,
        float(np.mean(codes == -1)), float(np.mean(codes == 1)), count / runs, low, high, "null" in scenario,
        float(fraction.mean()), float(np.percentile(fraction, 90)), float(np.mean(codes == fixed)),
        "fail" if fixed < 0 else "pass", (fixed < 0 and at_most) or (fixed > 0 and not at_most),
        time.perf_counter() - started,
    )  # fmt: skip


def scenarios(args: argparse.Namespace) -> list[tuple[str, str, Population, GateSettings]]:
    """(scenario, task, population, gate) for every row of the table."""
    rng = np.random.default_rng(args.seed)
    rows = []
    for task, docs in TASKS.items():
        margins = [(args.margin, "")] + ([(0.03, " (margin 0.03)")] if task == "arc_easy" else [])
        for margin, note in margins:
            drop_docs = max(1, round(margin * docs))
            gate = GateSettings(max_drop=drop_docs / docs, alpha=args.alpha)
            cases = [("null: drop = margin", drop_docs), ("null: no change", 0)]
            if not note:
                cases += [(f"drop {k}x margin", k * drop_docs) for k in (2, 5, 10, 20)]
                cases += [("improvement 2x margin", -2 * drop_docs)]
            for name, drop in cases:
                diffs = paired(docs, args.discordance, drop, rng)
                pop = Population(diffs.astype(np.int64), np.ones(docs, dtype=np.int64), diffs)
                rows.append((name + note, task, pop, gate))
    docs = TASKS["arc_easy"]
    drop_docs = round(args.margin * docs)
    gate = GateSettings(max_drop=drop_docs / docs, alpha=args.alpha)
    sizes, values, diffs = clustered(docs, args.discordance, drop_docs, rng)
    for name, pop in (
        ("clusters as units (cluster key)", Population(values, sizes.astype(np.int64), diffs)),
        (PASSAGE_ORDER, Population(values, sizes.astype(np.int64), diffs, "passages")),
        ("documents, document order (no key)", Population(diffs.astype(np.int64), np.ones(docs, np.int64), diffs)),
    ):
        rows.append((f"clustered null: {name}", "passages", pop, gate))
    return rows


def _summarize(job: tuple) -> Outcome:  # type: ignore[type-arg]
    return summarize(*job)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def acceptance(outcomes: list[Outcome], alpha: float, margin: float) -> list[tuple[str, bool]]:
    """The issue's acceptance lines, each with whether it holds."""
    checks = [
        (f"{o.task} {o.scenario}: false-verdict 95% upper {o.false_high:.4f} <= 1.25 alpha = {1.25 * alpha:.4f}",
         o.false_high <= 1.25 * alpha)
        for o in outcomes if o.null and PASSAGE_ORDER not in o.scenario
    ]  # fmt: skip
    arc = {o.scenario: o for o in outcomes if o.task == "arc_easy"}
    for k, bound in ((10, 0.15), (5, 0.35)):
        row = arc.get(f"drop {k}x margin")
        if row is not None:
            checks.append((
                f"arc_easy, margin {margin:g}, true drop {k * margin:.2f}: mean fraction of documents "
                f"{row.mean_fraction:.3f} <= {bound}", row.mean_fraction <= bound,
            ))  # fmt: skip
    row = arc.get("null: no change (margin 0.03)")
    if row is not None:
        checks.append((
            f"arc_easy, margin 0.03, no change: passes before the last document on average (mean fraction "
            f"{row.mean_fraction:.3f} < 1; passed {row.passed:.2%})", row.mean_fraction < 1.0,
        ))  # fmt: skip
    return checks


def line(o: Outcome) -> str:
    return (
        f"| {o.task} | {o.scenario} | {o.max_drop:.4f} | {o.true_diff:+.4f} | {o.fail:.2%} | {o.passed:.2%} | "
        f"{o.false_verdicts:.2%} [{o.false_low:.2%}, {o.false_high:.2%}] | {o.mean_fraction:.3f} | "
        f"{o.p90_fraction:.3f} | {o.same_as_full_run:.1%} | {o.fixed_verdict}, 1.000, "
        f"{'false' if o.fixed_false else 'right'} | {o.seconds:.1f} |"
    )


HEADER = (
    "| task | scenario | max_drop | true diff | fail | pass | false verdicts [95% CP] | mean frac. docs | "
    "p90 frac. | = full run | fixed-n: verdict, frac. docs, error | s |\n|" + "---|" * 12
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000, help="simulated paired runs per scenario")
    parser.add_argument("--quick", action="store_true", help="500 runs per scenario (a smoke test)")
    parser.add_argument("--discordance", type=float, default=0.20, help="share of documents the runs disagree on")
    parser.add_argument("--margin", type=float, default=0.01, help="max_drop of the main scenarios")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--first", type=int, default=64, help="units in the first round (round_sizes)")
    parser.add_argument("--growth", type=float, default=1.5, help="each round's size over the last (round_sizes)")
    parser.add_argument("--seed", type=int, default=53)
    parser.add_argument("--only", default="", help="run only scenarios whose task or name contains this")
    parser.add_argument("--jobs", type=int, default=1, help="scenarios simulated at once (processes)")
    parser.add_argument("--json", type=Path, help="write the outcomes and checks here")
    args = parser.parse_args(argv)
    runs = 500 if args.quick else args.runs
    started = time.perf_counter()
    print(
        f"CPU: {cpu_name()} ({platform.machine()}, Python {platform.python_version()}); runs per scenario: {runs}; "
        f"discordance {args.discordance}; alpha {args.alpha}; rounds first={args.first} growth={args.growth}"
    )
    print(HEADER)
    todo = [
        (name, task, population, gate, runs, args.first, args.growth, args.seed + i)
        for i, (name, task, population, gate) in enumerate(scenarios(args))
        if not args.only or args.only in f"{task} {name}"
    ]
    outcomes = []
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:  # scenarios side by side, same seeds
        for outcome in pool.imap(_summarize, todo):
            outcomes.append(outcome)
            print(line(outcome), flush=True)
    checks = acceptance(outcomes, args.alpha, args.margin)
    for text, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}: {text}")
    for o in outcomes:
        if PASSAGE_ORDER in o.scenario:
            print(
                f"NEED FOR THE CLUSTER KEY: passages read together but counted as independent documents: "
                f"false-verdict rate {o.false_verdicts:.2%} [{o.false_low:.2%}, {o.false_high:.2%}], "
                f"alpha {args.alpha}"
            )
    wall = time.perf_counter() - started
    print(f"wall time {wall:.0f} s ({args.jobs} processes)")
    if args.json:
        args.json.write_text(json.dumps({
            "cpu": cpu_name(), "runs": runs, "wall_s": wall, "outcomes": [asdict(o) for o in outcomes],
            "checks": [{"text": t, "ok": ok} for t, ok in checks],
        }, indent=1))  # fmt: skip
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
