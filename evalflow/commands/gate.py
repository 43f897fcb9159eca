"""``python -m evalflow gate baseline=FOLDER <candidate run settings> max_drop=X alpha=P``: a release
gate that stops as soon as the answer is known (docs/release-gate.md).

The candidate is evaluated on the baseline's documents in one seeded random order, in rounds of
growing size; each round is a normal, batched, cached run of the documents seen so far (the run
setting ``subset=``: every document keeps the prompt the whole run gives it, so a later whole run
computes only the rest). After each round every gated row (task or group x metric x filter) gets
an anytime-valid confidence interval for the paired mean difference over the WHOLE task
(:mod:`evalflow.insight.sequential`, sampling without replacement), at ``alpha`` split over the
rows. The gate stops at the first row that fails (exit 1), or when every row passes (exit 0); when
the documents run out it gives the full-run gate's verdict (``compare A B max_drop= alpha=``'s);
with ``budget=`` documents spent and a row still undecided it exits 3. Bad input exits 2::

    python -m evalflow gate baseline=outputs/release model=hf model.pretrained=ckpt-2 max_drop=0.01
    python -m evalflow gate baseline=outputs/release model.type=my.Model max_drop=0.02 budget=2000 out=outputs/gate
    python -m evalflow gate baseline=outputs/release max_drop=0.01 ranges=rating:1:10   # a bounded metric
    python -m evalflow gate baseline=outputs/suite model=smollm2 max_drop=0.01 rows=mmlu   # one group's number

The candidate's tasks are the baseline's (with ``rows=``, the named tasks' and groups') unless
``task=`` is given; its folder (``out=``) is a
valid run folder of the documents seen, marked partial in results.json, with ``gate.json``: the
order's seed, each round's documents and intervals, and the verdict.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalflow.commands.reference import print_help
from evalflow.commands.words import Command, Option, SettingWords, asks_for_help, parse_words
from evalflow.config.override_words import split_word
from evalflow.errors import ConfigError, RunFolderError
from evalflow.insight.gate import EVERY_ROW, GateSettings, RowChoice
from evalflow.insight.gate_sequence import (
    GatedRow,
    RowState,
    Unit,
    decided,
    documents_used,
    gated_rows,
    judge_round,
    round_prefixes,
    subset,
    unit_order,
)
from evalflow.output.partial import partial_tasks
from evalflow.output.run_folder import Run, ensure_fresh, load_run
from evalflow.output.run_paths import gate_record_file, gate_rounds_dir
from evalflow.scoring.registry import finite_range

if TYPE_CHECKING:
    from evalflow.models.registry import LoadedModels

BUDGET_EXIT = 3  # undecided when budget= documents were spent


def metric_ranges(value: str) -> dict[str, tuple[float, float]]:
    """METRIC:LOW:HIGH (finite numbers, LOW < HIGH; each metric once), comma-separated: ranges=f1:0:1,rating:1:10"""
    out = {}
    for item in value.split(","):
        name, low, high = item.strip().rsplit(":", 2)
        if not name or name in out:
            raise ValueError(value)
        out[name] = finite_range((low, high))
    return out


def positive(value: str) -> int:
    """a whole number, 1 or more"""
    if int(value) < 1:
        raise ValueError(value)
    return int(value)


COMMAND = Command(
    "gate",
    "a release gate that stops as soon as the verdict is known (anytime-valid, paired)",
    options=(
        Option("baseline", str, None, "the baseline's run folder (a whole run, with its samples)"),
        Option("max_drop", float, None, "fail on a metric worse than the baseline's by more than this (required)"),
        Option("alpha", float, 0.05, "the gate's error rate, split over the gated rows"),
        Option("order_seed", int, 1234, "the seed of the random order of the documents"),
        Option("budget", positive, None, "stop undecided (exit 3) before evaluating more documents than this"),
        Option("first", positive, 64, "the first round's size, in documents (or clusters); rounds then grow 1.5x"),
        Option("ranges", metric_ranges, {}, "a non-0/1 metric's range (over its registration's): ranges=f1:0:1"),
        Option("rows", RowChoice.parse, None, "gate only these tasks or groups (default: every row)"),
        Option("out", str, None, "the candidate's run folder (default outputs/gate/<date>/<time>)"),
    ),
    max_positional=0,
    settings=SettingWords(
        help="the candidate's run settings (docs/reference/run.md); task= defaults to the baseline's"
    ),
    doc=__doc__ or "",
)


def main(argv: list[str]) -> int:
    if not argv or asks_for_help(argv):
        print_help(COMMAND)
        return 0 if argv else 2
    words = parse_words(argv, COMMAND)
    missing = [name for name in ("baseline", "max_drop") if words.value(name) is None]
    if missing:
        raise ConfigError(
            f"gate: {' and '.join(f'{m}=' for m in missing)} missing: name the baseline's run folder (baseline=DIR) "
            f"and the tolerated drop (max_drop=0.01). {COMMAND.line()}"
        )
    gate = GateSettings(words.value("max_drop"), words.value("alpha"))
    baseline = load_run(Path(words.value("baseline")))
    check_baseline(baseline)
    choice = words.value("rows") or EVERY_ROW
    leaves = choice.leaves(baseline.tasks(), baseline.groups(), "gate")
    settings, config = _candidate(baseline, words.passed, choice, leaves)  # imports= first: a metric they register
    rows = gated_rows(baseline, words.value("ranges"), choice)  # declares its range
    order = unit_order({task: _clusters(baseline, task) for task in leaves}, words.value("order_seed"))
    out = Path(words.value("out") or Path("outputs") / "gate" / datetime.now().strftime("%Y-%m-%d/%H-%M-%S"))
    ensure_fresh(out, "out")
    # an interrupted gate's round runs (its own scratch, removed when it ends): begun again, from the cache
    shutil.rmtree(gate_rounds_dir(out), ignore_errors=True)
    record = {
        "baseline": str(baseline.folder),
        "order_seed": words.value("order_seed"),
        **dataclasses.asdict(gate),
        "budget": words.value("budget"),
        "rows": [r.name for r in rows],
        "decided_rows": [],  # the rows whose interval decided (none when the full run or the budget did)
        "rounds": [],
    }
    prefixes = round_prefixes(order, words.value("first"), words.value("budget"))
    plan = GatePlan(baseline, tuple(rows), order, prefixes, gate, choice)
    return _rounds(plan, settings, config, out, record)


def check_baseline(baseline: Run) -> None:
    """A baseline the gate can pair with: a whole run of whole tasks (a limited or partial one would
    make "the full run's verdict" the verdict of a sample)."""
    if partial_tasks(baseline.results):
        task, (n, total) = next(iter(partial_tasks(baseline.results).items()))
        raise ConfigError(
            f"gate: the baseline {baseline.folder} is a partial run (task '{task}': {n} of {total} documents); "
            "gate against a whole run of the baseline"
        )
    limit = (baseline.results.get("config") or {}).get("limit")
    counts = baseline.results.get("n-samples", {})
    cut = [t for t, c in counts.items() if c.get("effective", 0) < c.get("original", 0)]
    if limit is not None or cut:
        raise ConfigError(
            f"gate: the baseline {baseline.folder} evaluated part of its tasks ("
            + (f"limit={limit}" if limit is not None else f"task '{cut[0]}': {counts[cut[0]]}")
            + "); the gate samples the whole task, so its full-run verdict needs a whole baseline: rerun the "
            "baseline without limit= or samples="
        )


def _clusters(baseline: Run, task: str) -> dict[int, Any]:
    """The task's documents with their cluster ids, where the run records them (``Run.clusters``,
    a task's ``cluster_key``), else each document its own unit."""
    clusters = baseline.clusters(task) or {}
    return {doc: clusters.get(doc) for doc in baseline.doc_fingerprints(task, False)}


def _candidate(baseline: Run, passed: Sequence[str], choice: RowChoice, leaves: Sequence[str]) -> tuple[Any, Any]:
    """The candidate's settings, composed as a run composes them; its tasks default to the
    baseline's (with ``rows=``, to the tasks and groups it names) and must select ``leaves``."""
    from evalflow.config.compose import compose_config, without_unused_preset
    from evalflow.config.settings import settings_from_config

    overrides = list(passed)
    keys = [split_word(w)[0].lstrip("+") for w in overrides]
    refused = [k for k in ("limit", "samples", "subset") if k in keys]
    if refused:
        raise ConfigError(
            f"gate: {refused[0]}= chooses documents, which is the gate's own work (it evaluates the "
            "baseline's documents in a seeded order); drop it"
        )
    if "task" not in keys:
        task = baseline.config.get("task") if baseline.kind == "evalflow" else None
        names = task if isinstance(task, list) else [task] if isinstance(task, str) else baseline.tasks()
        names = list(dict.fromkeys(n for n, _, _ in choice.items)) if choice.items else names
        overrides.append(f"task=[{','.join(names)}]")
    config = compose_config(without_unused_preset(overrides))  # model.type=pkg:Class alone: as a run composes it
    settings = settings_from_config(config)
    _check_same_tasks(baseline, settings, leaves)
    return settings, config


def _check_same_tasks(baseline: Run, settings: Any, leaves: Sequence[str]) -> None:
    """The candidate's tasks are the ones the gate pairs (``leaves``: the baseline's, or those of
    the rows chosen), checked before any model call."""
    from evalflow.run.parts import select_tasks

    ours = {t.task for t in select_tasks(settings, checked=False).tasks}
    theirs = set(leaves)
    if ours != theirs:
        raise ConfigError(
            f"gate: the candidate's tasks ({', '.join(sorted(ours))}) are not the ones the gate pairs "
            f"({', '.join(sorted(theirs))}, of the baseline {baseline.folder}); the gate pairs every task of the "
            "baseline, or of the rows= it names. Drop task= (the candidate then takes those tasks), or gate "
            "against a baseline of these tasks"
        )


@dataclass(frozen=True)
class GatePlan:
    """What the rounds follow: the baseline, its gated rows, the seeded order of units, the
    number of units seen after each round, the gate's settings and the rows it judges."""

    baseline: Run
    rows: tuple[GatedRow, ...]
    order: tuple[Unit, ...]
    prefixes: tuple[int, ...]
    gate: GateSettings
    choice: RowChoice


def _rounds(plan: GatePlan, settings: Any, config: Any, out: Path, record: dict[str, Any]) -> int:
    """Each round a normal run of the documents seen so far, judged; the last round's folder
    becomes ``out``, with the gate's record beside it. The model is built once, on the first
    round that misses the cache, and answers every later round; a warning every round's run
    repeats (a task's few-shot note) is said once."""
    from evalflow.models.registry import LoadedModels

    folder, verdict, how, loaded = out, None, "budget", LoadedModels()
    chosen: dict[str, list[int]] = {}
    with warned_once():
        for k, seen in enumerate(plan.prefixes, start=1):
            chosen = subset(plan.order, seen)
            folder = gate_rounds_dir(out) / str(k)
            states, verdict, how = _one_round(plan, settings, folder, seen, chosen, loaded)
            if how == "sequential":
                record["decided_rows"] = [s.name for s in states if s.verdict == verdict]  # the rows that decided
            record["rounds"].append(_round_record(chosen, plan.baseline, states, verdict))
            _print_round(k, chosen, plan.baseline, states, verdict, how)
            if verdict is not None:
                break
    _finish(out, folder, config, record, verdict, how, chosen)
    print(f"gate: {verdict or 'undecided'} ({how}); run folder: {out}", file=sys.stderr)
    return {"fail": 1, "pass": 0}.get(verdict or "", BUDGET_EXIT)


def _one_round(
    plan: GatePlan, settings: Any, folder: Path, seen: int, chosen: Mapping[str, list[int]], loaded: LoadedModels
) -> tuple[list[RowState], str | None, str]:
    """One round's run (into ``folder``) and its judgement: the rows' states, the verdict so far,
    and what decided it ("sequential", "full run" when the documents ran out, else "budget")."""
    from evalflow.run.phases import run

    whole = seen == len(plan.order)
    as_setting = {task: tuple(docs) for task, docs in chosen.items()}  # as subset= parses it
    run(dataclasses.replace(settings, subset=None if whole else as_setting), folder, loaded=loaded)
    candidate = load_run(folder)
    _check_same_documents(plan.baseline, candidate)
    states = judge_round(plan.rows, plan.order, seen, candidate, plan.gate.alpha, plan.gate.max_drop)
    if whole:  # the documents ran out: today's full-run gate decides, as if the gate had not been sequential
        return states, _full_run_verdict(plan.baseline, candidate, plan.gate, plan.choice), "full run"
    verdict = decided(states)
    return states, verdict, "budget" if verdict is None else "sequential"


@contextlib.contextmanager
def warned_once() -> Iterator[None]:
    """Within the block, each distinct warning reaches each of the log's handlers once: the rounds
    are one evaluation to the user, and each round's run would repeat its tasks' warnings."""
    filters = [(handler, _FirstTime()) for handler in logging.getLogger().handlers]
    for handler, first_time in filters:
        handler.addFilter(first_time)
    try:
        yield
    finally:
        for handler, first_time in filters:
            handler.removeFilter(first_time)


class _FirstTime(logging.Filter):
    """Passes records below WARNING, and a warning the first time its logger says it."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.getMessage())
        new = record.levelno < logging.WARNING or key not in self.seen
        self.seen.add(key)
        return new


def _full_run_verdict(baseline: Run, candidate: Run, gate: GateSettings, choice: RowChoice) -> str:
    from evalflow.insight.comparison import compare, verdicts
    from evalflow.insight.gate import failures

    rows = [r for r in compare(baseline, candidate, alpha=gate.alpha) if choice.takes(r.task, r.metric, r.filter)]
    judged = verdicts(rows, gate)
    for v in failures(judged):
        print(f"REGRESSION: {v.name}: {v.reason}")
    return "fail" if failures(judged) else "pass"


def _check_same_documents(baseline: Run, candidate: Run) -> None:
    """The candidate read the baseline's documents (a paired difference needs the same ones)."""
    for task in candidate.tasks():
        if task not in baseline.tasks():
            continue
        ours, theirs = candidate.doc_fingerprints(task, False), baseline.doc_fingerprints(task, False)
        differing = [d for d in ours if theirs.get(d) != ours[d]]
        if differing:
            raise RunFolderError(
                f"gate: task '{task}': document {differing[0]} differs between the baseline {baseline.folder} and "
                "the candidate: they read different data; a paired gate needs the same documents"
            )


def _counts(chosen: Mapping[str, Sequence[int]], baseline: Run) -> dict[str, list[int]]:
    """Each evaluated task's documents in this round, of the baseline's."""
    return {t: [len(docs), len(baseline.doc_fingerprints(t, False))] for t, docs in chosen.items()}


def _round_record(
    chosen: Mapping[str, Sequence[int]], baseline: Run, states: Sequence[RowState], verdict: str | None
) -> dict[str, Any]:
    return {
        "documents": _counts(chosen, baseline),
        "doc_ids": {t: list(d) for t, d in chosen.items()},
        "rows": [dataclasses.asdict(s) for s in states],
        "verdict": verdict,
    }


def _print_round(
    k: int,
    chosen: Mapping[str, Sequence[int]],
    baseline: Run,
    states: Sequence[RowState],
    verdict: str | None,
    how: str,
) -> None:
    print(f"round {k}: {documents_used(_counts(chosen, baseline))}")
    for s in states:
        print(f"  {s.name}: [{s.low:+.4f}, {s.high:+.4f}] over {s.seen} of {s.documents}: {s.verdict or 'undecided'}")
    if how == "full run":  # the rows' exact differences above; a drop beyond max_drop fails only if not noise
        print(f"  the documents ran out: the full-run gate (compare's paired test at alpha) decides: {verdict}")
    else:
        print(f"  verdict so far: {verdict or 'undecided'}")


def _finish(
    out: Path,
    last: Path,
    config: Any,
    record: dict[str, Any],
    verdict: str | None,
    how: str,
    chosen: Mapping[str, Sequence[int]],
) -> None:
    """The last round's run folder moved to ``out``, its snapshot (the candidate's config with the
    documents it saw) and the gate's record written beside it; the other rounds removed."""
    from omegaconf import open_dict

    from evalflow.output.run_folder import atomic_write, write_snapshot

    for entry in last.iterdir():
        shutil.move(str(entry), out / entry.name)
    shutil.rmtree(gate_rounds_dir(out))
    with open_dict(config):
        config.subset = None if how == "full run" else {t: list(d) for t, d in chosen.items()}
    write_snapshot(out, config)
    record.update(verdict=verdict or "undecided", decided_by=how)
    atomic_write(gate_record_file(out), [json.dumps(record, indent=2), "\n"])
