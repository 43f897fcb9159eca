"""``python -m evalflow rescore SAMPLES... task=NAME``: score saved model answers again, under the
current task config, without a model.

The samples files (lm-eval 0.4.x's ``samples_<task>_<date>.jsonl`` or evalflow's
``samples_<task>.jsonl``) hold each document, its requests (``arguments``) and the model's raw
answers (``resps``). Four source nodes read them in place of load_docs → fewshot → instances →
inference, and the pipeline's own filters → metrics → aggregate nodes run unchanged on top, through
the DAG runner and the cache; the result is a normal run folder (results.json, samples, manifest)::

    python -m evalflow rescore peer-out/model/samples_gsm8k_2026-11-30T12-00-00.jsonl task=gsm8k
    python -m evalflow rescore outputs/run/samples_arc_easy.jsonl task=arc_easy out=outputs/rescored
    python -m evalflow rescore peer-out/model/samples_mmlu_*.jsonl task=mmlu include_path=[my/tasks]

A changed filter or metric in the task YAML gives the new score; the answers stay as they were.
A judge metric is judged on the recorded answers: the judge model (the task's, or ``judge_model=``)
is the only model that runs, through the same per-request cache as in a run.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalflow.cache.fingerprint import fingerprint
from evalflow.core.records import Context, DocSet, Finish, Instance, Request, Responses
from evalflow.dag.node import Node
from evalflow.dag.pipeline import PIPELINE
from evalflow.errors import ConfigError, RunFolderError
from evalflow.output.events import EventsWriter, recorded
from evalflow.output.run_paths import LMEVAL_SAMPLES_PATTERN, SAMPLES_PATTERN, samples_stem
from evalflow.taskspec.format.spec import TaskConfig

if TYPE_CHECKING:
    from evalflow.config.schema import RunSettings
    from evalflow.taskspec.catalog.index import Selection

Rows = tuple[Mapping[str, Any], ...]  # one samples line per document (the first filter's line)


def _samples_identity(task: TaskConfig, settings: Mapping[str, Any]) -> str:
    return fingerprint(settings["recorded"])


def docs_from_samples(recorded: Rows) -> DocSet:
    """The documents as the samples recorded them, at their doc_id (gaps hold the first document,
    never scored: only lm-eval's "decide from the first document" rules look at docs[0])."""
    by_id = {int(r["doc_id"]): r["doc"] for r in recorded}
    first = by_id[min(by_id)]
    return DocSet("samples", tuple(by_id.get(i, first) for i in range(max(by_id) + 1)))


def contexts_from_samples(recorded: Rows) -> tuple[Context, ...]:
    def prompt(row: Mapping[str, Any]) -> str:
        args = list(row.get("arguments", {}).values())
        return str(args[0].get("arg_0", "")) if args else ""

    return tuple(Context(int(r["doc_id"]), prompt(r)) for r in recorded)


def instances_from_samples(task: TaskConfig, recorded: Rows) -> tuple[Instance, ...]:
    """One instance per recorded request and repeat, with the request's arguments."""
    rtype = _request_type(task)
    out: list[Instance] = []
    for row in recorded:
        for idx, (args, answers) in enumerate(zip(_arguments(row), row["resps"])):
            out.extend(Instance(int(row["doc_id"]), idx, Request(rtype, args, repeat=r)) for r in range(len(answers)))
    return tuple(out)


def responses_from_samples(task: TaskConfig, recorded: Rows) -> Responses:
    """The raw answers, as the model returned them (lm-eval writes them as strings), and for
    generations how each ended, from evalflow's ``finish`` entries (unknown in lm-eval's files)."""
    rtype = _request_type(task)
    values = tuple(_answer(rtype, a) for row in recorded for answers in row["resps"] for a in answers)
    if rtype != "generate_until":
        return Responses(values)
    finishes = tuple(
        _finish(row.get("finish"), i, j)
        for row in recorded
        for i, answers in enumerate(row["resps"])
        for j in range(len(answers))
    )
    return Responses(values, finishes)


def _finish(recorded: Any, instance: int, repeat: int) -> Finish:
    """The backend's finish of one answer as a samples file's ``finish`` entry recorded it (for a
    ``thinking_unclosed`` one, ``stopped_by``: that reason is derived again from the run's marker)."""
    try:
        entry = recorded[instance][repeat]
    except (TypeError, IndexError, KeyError):
        return Finish()
    if not isinstance(entry, Mapping):
        return Finish()
    reason = entry.get("stopped_by") if entry.get("stop_reason") == "thinking_unclosed" else entry.get("stop_reason")
    return Finish(
        stop_reason=reason,
        prompt_tokens=entry.get("prompt_tokens"),
        completion_tokens=entry.get("completion_tokens"),
        reasoning_tokens=entry.get("reasoning_tokens"),
        reasoning=entry.get("reasoning"),
        thinking_closed=entry.get("thinking_closed"),
    )


def _request_type(task: TaskConfig) -> Any:
    return "loglikelihood" if task.output_type == "multiple_choice" else task.output_type


def _arguments(row: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    args = row.get("arguments", {})
    if isinstance(args, list):  # lm-eval's in-memory form
        return [tuple(a) for a in args]
    return [
        tuple(a[f"arg_{j}"] for j in range(len(a)))
        for _, a in sorted(args.items(), key=lambda kv: int(kv[0].rsplit("_", 1)[1]))
    ]


def _answer(rtype: str, value: Any) -> Any:
    if rtype == "loglikelihood":
        logprob, greedy = value
        return (float(logprob), greedy in (True, "True"))
    if rtype == "loglikelihood_rolling":
        return float(value)
    return value if isinstance(value, str) else str(value)


def _source(name: str, function: str, output: str, **declared: Any) -> Node:
    """A node that reads the samples (hashed by content, never by path) in place of a stage."""
    return Node(
        name,
        f"evalflow.run.rescoring:{function}",
        output,
        run_settings=("recorded",),
        unhashed=("recorded",),
        **declared,
    )


RESCORE_PIPELINE: tuple[Node, ...] = (
    _source("load_docs", "docs_from_samples", "docs", identity={"recorded": _samples_identity}),
    _source("fewshot", "contexts_from_samples", "contexts", upstream=("load_docs",)),
    _source("instances", "instances_from_samples", "instances", task_fields=("output_type",), upstream=("load_docs",)),
    _source("inference", "responses_from_samples", "responses", task_fields=("output_type",), upstream=("instances",)),
) + tuple(
    node for node in PIPELINE if node.name in ("filters", "judge_requests", "judge_inference", "metrics", "aggregate")
)
"""The answers come from the samples; scoring is the evaluation pipeline's own nodes (with the
judge stages for tasks with judge metrics: only the judge model runs, on the recorded answers)."""


def read_samples(paths: Sequence[Path]) -> Rows:
    """One line per document (lm-eval writes one per filter, with the same answers)."""
    rows: dict[int, Mapping[str, Any]] = {}
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    doc_id = int(row["doc_id"])
                    if "doc" not in row or "resps" not in row:
                        raise KeyError("doc" if "doc" not in row else "resps")
                except (ValueError, KeyError, TypeError) as exc:
                    raise RunFolderError(
                        f"{path}, line {n}: not a samples line with doc_id, doc, arguments and resps ({exc!r}); "
                        f"rescore reads lm-eval's {LMEVAL_SAMPLES_PATTERN} or evalflow's {SAMPLES_PATTERN}"
                    ) from None
                rows.setdefault(doc_id, row)
    if not rows:
        raise RunFolderError(f"{', '.join(map(str, paths))}: no samples lines; nothing to rescore")
    return tuple(rows[d] for d in sorted(rows))


def _task_files(tasks: Sequence[TaskConfig], paths: Sequence[Path]) -> dict[str, list[Path]]:
    """Which samples files belong to which task: all to the one task, else by file name."""
    if len(tasks) == 1:
        return {tasks[0].task: list(paths)}
    out: dict[str, list[Path]] = {t.task: [] for t in tasks}
    for path in paths:
        stem = samples_stem(path)
        owner = max((t for t in out if stem == t or stem.startswith(t + "_2")), key=len, default=None)
        if owner is None:
            raise ConfigError(
                f"{path}: cannot tell which of the {len(tasks)} selected tasks it belongs to; name it "
                f"{SAMPLES_PATTERN} or {LMEVAL_SAMPLES_PATTERN}, or rescore one task at a time"
            )
        out[owner].append(path)
    missing = [t for t, files in out.items() if not files]
    if missing:
        raise ConfigError(
            f"no samples file given for task(s) {', '.join(missing)}; give {SAMPLES_PATTERN} or "
            f"{LMEVAL_SAMPLES_PATTERN} for each"
        )
    return out


def rescore(paths: Sequence[Path], overrides: Sequence[str], output_dir: Path) -> dict[str, Any]:
    """Score the answers in ``paths`` under the task config ``overrides`` select; write the run folder."""
    from evalflow.config.compose import compose_config
    from evalflow.config.settings import settings_from_config
    from evalflow.run.parts import select_tasks

    started = time.time()
    settings = settings_from_config(compose_config([*overrides, "model=dummy"]))
    settings = dataclasses.replace(settings, model={"type": "rescore", "samples": [str(p) for p in paths]})
    selection = select_tasks(settings)
    with recorded(output_dir, settings.tasks, "rescore") as progress:
        return _rescored(settings, selection, paths, output_dir, started, progress)


def _rescored(
    settings: RunSettings,
    selection: Selection,
    paths: Sequence[Path],
    output_dir: Path,
    started: float,
    progress: EventsWriter | None,
) -> dict[str, Any]:
    """:func:`rescore`'s scoring and run folder, its judges' progress recorded by ``progress``."""
    from evalflow.cache.store import CacheStore
    from evalflow.dag.runner import TaskRun, finish
    from evalflow.output.results import RunRecord, build_results
    from evalflow.output.run_folder import write_run_folder
    from evalflow.run.parts import judge_edges, task_rng
    from evalflow.scale.answer_cache import InferenceCounts

    store = CacheStore(settings.cache_dir)
    judges = judge_edges(settings, store)
    outputs, events = {}, []
    try:
        for task, files in _task_files(selection.tasks, paths).items():
            config = next(t for t in selection.tasks if t.task == task)
            judge_settings, judge_resource = judges.for_task(config)
            run_settings = {
                "recorded": read_samples(files),
                "think_end_token": settings.think_end_token,
                "bootstrap_iters": settings.bootstrap_iters,
                "code_sandbox": settings.code_sandbox,
                "task_rng": task_rng(settings),
                "judges": judge_settings,
            }
            run = TaskRun(config, run_settings, RESCORE_PIPELINE)  # the run's runner, on the recorded answers
            events.extend(finish(run, store, {"judges": judge_resource}, {"judge_inference": judges.counts}))
            outputs[task] = run.outputs
        # written while the cache is open: cached stage outputs are decoded when the writers use them
        record = RunRecord(
            settings,
            selection,
            outputs,
            events,
            InferenceCounts(),
            started,
            time.time(),
            settings.model,
            judge=judges.counts if judges.edges else None,
            judge_identities=judges.identities,
        )
        results = build_results(record)
        write_run_folder(output_dir, record, results, store, before_results=progress.end if progress else None)
    finally:
        judges.close()
        store.close()
    return results
