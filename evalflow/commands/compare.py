"""``python -m evalflow compare RUN_A RUN_B``: per task, group and metric, A, B, B - A, and a paired
test over the documents both runs scored.

0/1 metrics (acc, exact_match) get the exact McNemar test, others a seeded paired bootstrap; every
row gets the bootstrap's 95% interval of the difference (:mod:`evalflow.insight.stats`). Groups are
paired over all documents of their leaf tasks. Runs are paired only when they scored the same
documents of the same data; either may be an evalflow run folder or an lm-eval output folder::

    python -m evalflow compare outputs/run_a outputs/run_b
    python -m evalflow compare peer-out/ outputs/run_b --json bootstrap_iters=10000 seed=1234
    python -m evalflow compare outputs/release outputs/candidate max_drop=0.01 alpha=0.05   # the gate
    python -m evalflow compare outputs/release outputs/candidate max_drop=0.01 rows=mmlu   # gate the group alone

With ``kappa=METRIC_A,METRIC_B`` it gives, instead, Cohen's kappa between A's per-document
METRIC_A and B's METRIC_B over the paired documents (:mod:`evalflow.insight.agreement`); with one
folder, between two metrics of that run (a judge and exact_match)::

    python -m evalflow compare outputs/run kappa=judge_correct,exact_match
    python -m evalflow compare outputs/judge_a outputs/judge_b kappa=judge_correct   # one metric, two runs
    python -m evalflow compare outputs/run kappa=judge@raw,exact_match@flexible-extract   # named filters

Documents with a value in one run only (a judge verdict left out as unparsed) are left out of
the pairing and counted (``left_out``); a metric with no value at all gets a row that says so,
and in the gate fails when the candidate lacks it (not gated when the baseline does).

With ``max_drop=`` or ``alpha=`` it is a release gate (:mod:`evalflow.insight.gate`): exit 1 when
any metric got worse by more than ``max_drop`` with the paired test's ``p < alpha`` (the failing
rows are printed), exit 0 otherwise, exit 2 on bad input. Every row also shows the smallest
difference its paired documents can detect at ``alpha`` (default 0.05).

When the two runs cut off different shares of a task's generations (at ``max_gen_toks`` or inside
unclosed thinking; the rule is :mod:`evalflow.insight.truncation_change`'s), a ``TRUNCATION:`` line
per task says so beside the verdicts, and ``--json`` records every task's shares under
``truncation``: a drop that comes with more truncation is likely a shorter budget, not a worse
model. The gate's verdict is unchanged (a failing gate still fails; its line points there).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalflow.commands.reference import print_help
from evalflow.commands.words import Command, Flag, Option, asks_for_help, parse_words
from evalflow.config.override_words import split_word
from evalflow.errors import ConfigError
from evalflow.insight.comparison import DEFAULT_ITERS, Comparison, check_paired, compare, missing_tasks, verdicts
from evalflow.insight.gate import EVERY_ROW, GateSettings, RowChoice, Verdict, failures
from evalflow.insight.truncation_change import TruncationChange, truncation_changes, truncation_line
from evalflow.output.run_folder import Run, load_run


def as_table_rows(rows: Sequence[Comparison]) -> list[list[str]]:
    def num(x: float | None, sign: bool = False) -> str:
        return "" if x is None else (f"{x:+.4f}" if sign else f"{x:.4f}")

    return [
        [
            f"{r.task} (group)" if r.group else r.task,
            r.filter,
            r.metric,
            num(r.a),
            num(r.b),
            num(r.diff, True),
            f"[{num(r.low, True)}, {num(r.high, True)}]" if r.low is not None else "",
            "" if r.p_value is None else f"{r.p_value:.4g}",
            r.test or r.note,
            str(r.n),
            _detectable(r),
        ]
        for r in rows
    ]


def _detectable(row: Comparison) -> str:
    if row.test is None:
        return ""
    return "none" if row.detectable is None else f"{row.detectable:.4f}"


COLUMNS = ("Task", "Filter", "Metric", "A", "B", "B - A", "95% CI", "p", "Test", "Docs", "Detectable")


def metric_pair(value: str) -> tuple[str, str]:
    """one metric name (the same in both runs) or two, comma-separated: kappa=judge_correct,exact_match"""
    names = [n.strip() for n in value.split(",")]
    if len(names) > 2 or not all(names):
        raise ValueError(value)
    return (names[0], names[-1])


COMMAND = Command(
    "compare",
    "per metric A, B, B - A, a paired test; a release gate; Cohen's kappa",
    "RUN_A RUN_B",
    2,
    2,
    (
        Option("bootstrap_iters", int, DEFAULT_ITERS, "the paired bootstrap's resamples"),
        Option("seed", int, 1234, "the paired bootstrap's seed"),
        Option("max_drop", float, 0.0, "the gate: fail on a metric worse by more than this (with p < alpha)"),
        Option("alpha", float, 0.05, "the gate's significance level, and the level of the Detectable column"),
        Option("rows", RowChoice.parse, None, "gate only these tasks or groups (default: every row)"),
        Option("kappa", metric_pair, None, "instead, Cohen's kappa between A's METRIC_A and B's METRIC_B"),
    ),
    (Flag("--json", "print the rows (and the gate's verdict) as JSON"),),
    doc=__doc__ or "",
)
# with kappa=, one folder is enough: two metrics of that run
KAPPA_COMMAND = dataclasses.replace(
    COMMAND, positional="RUN_A [RUN_B]", min_positional=1, note="(kappa= with one folder: two metrics of that run)"
)


@dataclass(frozen=True)
class CompareArgs:
    folders: tuple[Path, Path]
    iters: int
    seed: int
    gate: GateSettings | None  # None: no max_drop= or alpha= given, so no verdict and exit 0
    as_json: bool
    kappa: tuple[str, str] | None = None  # kappa=: (A's metric, B's metric); folders[1] is folders[0] for one run
    rows: RowChoice = EVERY_ROW  # rows=: the rows the gate judges


def parse_args(argv: Sequence[str]) -> CompareArgs:
    """The command line, every word accounted for: an unknown option or flag is refused."""
    kappa = any(split_word(word)[0] == "kappa" for word in argv)
    words = parse_words(argv, KAPPA_COMMAND if kappa else COMMAND)
    options = words.options
    gated = "max_drop" in options or "alpha" in options
    gate = GateSettings(words.value("max_drop"), words.value("alpha")) if gated else None
    if "rows" in options and not gated:
        raise ConfigError(
            "compare: rows= chooses the rows the release gate judges; give the gate too (max_drop=0.01), "
            f"or drop rows=. {COMMAND.line()}"
        )
    if kappa:
        _check_kappa(words.positional, options)
    first, second = (*words.positional, *words.positional)[:2]
    return CompareArgs(
        (Path(first), Path(second)),
        words.value("bootstrap_iters"),
        words.value("seed"),
        gate,
        "--json" in words.flags,
        options.get("kappa"),
        words.value("rows") or EVERY_ROW,
    )


def _check_kappa(folders: Sequence[str], options: Mapping[str, Any]) -> None:
    """kappa= measures agreement, not a difference: refuse what would be silently ignored."""
    ignored = [k for k in ("max_drop", "alpha", "bootstrap_iters", "seed", "rows") if k in options]
    if ignored:
        raise ConfigError(
            f"compare: kappa= gives the agreement of two metrics, which {', '.join(k + '=' for k in ignored)} "
            f"do not apply to; run compare once with kappa= and once without. {KAPPA_COMMAND.line()}"
        )
    metric_a, metric_b = options["kappa"]
    if len(folders) == 1 and metric_a == metric_b:
        raise ConfigError(
            f"compare {folders[0]} kappa={metric_a}: with one run, name two of its metrics "
            f"(kappa={metric_a},exact_match); one metric agrees with itself. {KAPPA_COMMAND.line()}"
        )


def main(argv: list[str]) -> int:
    """``compare RUN_A RUN_B [--json] [bootstrap_iters=N] [seed=N] [max_drop=X] [alpha=P]``, or
    ``compare RUN_A [RUN_B] kappa=METRIC_A[,METRIC_B] [--json]``."""
    if asks_for_help(argv):
        print_help(COMMAND)
        return 0
    args = parse_args(argv)
    alpha = args.gate.alpha if args.gate else 0.05
    run_a = load_run(args.folders[0])
    run_b = run_a if args.folders[1] == args.folders[0] else load_run(args.folders[1])
    if args.kappa is not None:
        return _kappa_main(run_a, run_b, *args.kappa, as_json=args.as_json)
    rows = compare(run_a, run_b, args.iters, args.seed, alpha)
    judged = _judged(args, run_a, run_b, rows) if args.gate else []
    failed = failures(judged)
    shifts = truncation_changes(run_a, run_b, [t for t in run_a.tasks() if t in run_b.tasks()], alpha)
    shifted = [c for c in shifts if c.differs]
    if args.as_json:
        _print_json(args, run_a, run_b, rows, shifts, judged)
    else:
        _print_text(run_a, run_b, rows, judged, shifted, alpha)
        if args.rows.items:  # the table shows every row; say which the gate judged
            print(f"GATED (rows=): {', '.join(v.name for v in judged)}")
    if args.gate is not None:
        print(
            f"gate: {len(failed)} regression(s) in {len(judged)} metric(s); {'FAILED' if failed else 'passed'}"
            + _truncation_note(shifted),
            file=sys.stderr,
        )
    return 1 if failed else 0


def _judged(args: CompareArgs, run_a: Run, run_b: Run, rows: Sequence[Comparison]) -> list[Verdict]:
    """The gate's verdicts: each chosen row (``rows=``, default every row), and a failing one for
    each baseline task the candidate did not evaluate (compare pairs the tasks both runs have,
    so a candidate that dropped a task would otherwise pass on the rest)."""
    assert args.gate is not None
    leaves = args.rows.leaves(run_a.tasks(), run_a.groups(), "compare")
    args.rows.check([(r.task, r.metric, r.filter) for r in rows], "compare")
    chosen = [r for r in rows if args.rows.takes(r.task, r.metric, r.filter)]
    return verdicts(chosen, args.gate) + missing_tasks(run_a, run_b, leaves)


def _print_json(
    args: CompareArgs,
    run_a: Run,
    run_b: Run,
    rows: Sequence[Comparison],
    shifts: Sequence[TruncationChange],
    judged: Sequence[Verdict],
) -> None:
    """``--json``: the rows, every task's truncation shares, and the gate's rows and failures."""
    failed = failures(judged)
    print(
        json.dumps(
            {
                "a": str(run_a.folder),
                "b": str(run_b.folder),
                "bootstrap_iters": args.iters,
                "seed": args.seed,
                "alpha": args.gate.alpha if args.gate else 0.05,
                "rows": [dataclasses.asdict(r) for r in rows],
                # each task whose truncation rate both runs record (insight/truncation_change.py)
                "truncation": [{**dataclasses.asdict(c), "a_share": c.a_share, "b_share": c.b_share} for c in shifts],
                "gate": None
                if args.gate is None
                else {
                    **dataclasses.asdict(args.gate),
                    "gated": [v.name for v in judged],
                    "failed": [v.name for v in failed],
                },
            },
            indent=2,
        )
    )


def _print_text(
    run_a: Run,
    run_b: Run,
    rows: Sequence[Comparison],
    judged: Sequence[Verdict],
    shifted: Sequence[TruncationChange],
    alpha: float,
) -> None:
    """The table, then a line per paired row that left documents out, per verdict worth reading,
    and per task whose truncation rates differ."""
    from evalflow.output.table import print_table

    print_table(
        f"A: {run_a.folder}  B: {run_b.folder}",
        COLUMNS,
        as_table_rows(rows),
        right=("A", "B", "B - A", "p", "Docs", "Detectable"),
    )
    print(f"Detectable: the smallest |B - A| these paired documents can show at alpha={alpha:g}")
    for r in rows:
        if r.test and r.note:  # the Test column shows the test; documents left out of it are said here
            print(f"PAIRED: {r.task}{' (group)' if r.group else ''} {r.metric},{r.filter}: {r.note}")
    for verdict in judged:
        if verdict.failed or verdict.reason.startswith("not gated"):
            print(f"{'REGRESSION' if verdict.failed else 'NOT GATED'}: {verdict.name}: {verdict.reason}")
    for change in shifted:  # beside the verdicts: what a drop (or a gain) may owe to a budget
        print(truncation_line(change, alpha))


def _truncation_note(shifted: Sequence[TruncationChange]) -> str:
    """The gate's line, when the runs cut off different shares of some task's generations."""
    if not shifted:
        return ""
    return f" (truncation rates differ on {', '.join(c.task for c in shifted)}: see the TRUNCATION lines)"


def _kappa_main(run_a: Run, run_b: Run, metric_a: str, metric_b: str, as_json: bool) -> int:
    """``compare RUN_A [RUN_B] kappa=M[,N]``: the agreement table (or JSON); exit 0."""
    from evalflow.insight import agreement
    from evalflow.output.table import print_table

    tasks = run_a.tasks() if run_b is run_a else [t for t in run_a.tasks() if t in run_b.tasks()]
    if run_b is not run_a:
        for task in tasks:
            check_paired(run_a, run_b, task)
    rows = agreement.agreement(run_a, run_b, metric_a, metric_b, tasks)
    if as_json:
        print(json.dumps({"a": str(run_a.folder), "b": str(run_b.folder), "kappa": agreement.as_json(rows)}, indent=2))
    else:
        print_table(
            f"Cohen's kappa, A: {run_a.folder} {metric_a}  B: {run_b.folder} {metric_b}",
            agreement.COLUMNS,
            agreement.as_table_rows(rows),
            right=("Docs", "Agreement", "By chance", "Kappa"),
        )
    return 0
