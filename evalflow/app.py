"""One evaluation run, as a few named phases: settings → tasks → model edge → DAG → run folder.

    from evalflow import evaluate
    results = evaluate(task="arith_mc", model="dummy", limit=10)
    results["results"]["arith_mc"]["acc,none"]

The Hydra entry point (``python -m evalflow``) and :func:`evaluate` both end in :func:`run`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import os
import time
from pathlib import Path
from typing import Any, Iterator, Mapping

from evalflow.cache.fingerprint import fingerprint
from evalflow.cache.images import ImageStore
from evalflow.cache.store import CacheStore
from evalflow.config.schema import stage_settings
from evalflow.dag.inference import CachedModel, InferenceCounts
from evalflow.dag.progress import pooled_label, progress_label
from evalflow.dag.runner import VOLATILE, StageEvent, TaskRun
from evalflow.errors import ConfigError, TaskError, UnsafeCodeError
from evalflow.judges import JudgeEdges, check_judges
from evalflow.load_checks import check_selection
from evalflow.user_modules import import_user_modules
from evalflow.models.base import feature
from evalflow.models.modality import refuse_unanswerable
from evalflow.models.registry import build_model, model_arguments, model_class, model_identity
from evalflow.output.results import RunRecord, build_results
from evalflow.output.run_info import object_model
from evalflow.output.run_folder import ensure_fresh, write_run_folder, write_snapshot
from evalflow.output.summary import TaskSummary, cached_summary
from evalflow.sandbox.registry import require_sandbox
from evalflow.scale import chunks
from evalflow.scoring.code_exec import runs_code
from evalflow.settings import RunSettings
from evalflow.taskspec.data.datamap import check_data_files
from evalflow.taskspec.catalog.index import Selection, TaskIndex
from evalflow.taskspec.prompts.fewshot_context import effective_num_fewshot
from evalflow.taskspec.catalog.run_options import apply_run_options
from evalflow.taskspec.prompts.samplers import fewshot_warnings
from evalflow.taskspec.format.spec import TaskConfig

log = logging.getLogger(__name__)


def run(settings: RunSettings, output_dir: Path | None = None, model: Any = None,
        preset: str | None = None) -> dict[str, Any]:
    """Evaluate ``settings`` and return lm-eval's results dict; write the run folder if given.

    ``model`` is an already-built model object (for embedding); else ``settings.model`` is built
    lazily on the first cache miss. ``preset``: the ``model=`` preset the user named, which a
    refusal names (``smollm2``, not its type ``hf``).
    """
    started = time.time()
    if output_dir is not None:
        ensure_fresh(output_dir)
    if model is None:  # import the model's class first: a model.type module may register metrics too
        model_class(str(settings.model["type"]))
    selection = select_tasks(settings)
    refuse_unanswerable(selection.tasks, model if model is not None else model_class(str(settings.model["type"])),
                        type(model).__name__ if model is not None else preset or str(settings.model["type"]))
    store = CacheStore(settings.cache_dir)
    try:
        edge = model_edge(settings, store, model)
        judges = judge_edges(settings, store)
        try:
            outputs, events, summaries = evaluate_tasks(selection, settings, store, edge, judges)
        finally:
            edge.close()
            judges.close()
        count_cached_stages(outputs, events, edge, judges, summaries)
        ran = settings.model if model is None else object_model(model, edge.identity_data)
        record = RunRecord(settings, selection, outputs, events, edge.counts, started, time.time(), edge.identity_data, ran,
                           judge=judges.counts if judges.edges else None, judge_identities=judges.identities,
                           summaries=summaries)
        results = build_results(record)
        if output_dir is not None:
            write_run_folder(output_dir, record, results, store)
            if settings.explain:
                _print_explanation(output_dir)
        return results
    finally:
        store.close()


def _print_explanation(output_dir: Path) -> None:
    """``explain=true``: the lines of ``python -m evalflow explain`` for this run, on stderr."""
    import sys

    from evalflow.insight.explain import explain

    lines = explain(output_dir)
    print("\n".join(lines) if lines else "explain: every stage was served from the cache", file=sys.stderr)


def select_tasks(settings: RunSettings, *, checked: bool = True) -> Selection:
    """The selected tasks; ``checked``: also every load-time check (evalflow.load_checks, and that
    every local data file exists), so a task that cannot be scored fails here, before any model
    call (``validate`` checks per task)."""
    import_user_modules(settings.imports)  # what they register must exist before the checks below
    index = TaskIndex.build(settings.include_path)
    try:
        selection = index.resolve(list(settings.tasks), trust_task_code=settings.trust_task_code)
    except TaskError as exc:
        raise _with_skipped_files(exc, index) from exc
    selection = apply_run_options(selection, samples=settings.samples, predict_only=settings.predict_only)
    for task in selection.tasks:
        if task.unsafe_code and not settings.confirm_unsafe_code:
            raise UnsafeCodeError(
                f"task '{task.task}' ({task.source}) is marked unsafe_code: true: its metric executes code "
                "the model wrote. Pass confirm_unsafe_code=true to allow it: evalflow's code metrics (pass_at_k, "
                "pass_at_1, as in the built-in humaneval/mbpp) run each program in the code_sandbox backend "
                "(bubblewrap by default); any other task code that executes programs runs them as it is written."
            )
        if runs_code(task):
            require_sandbox(settings.code_sandbox, f"task '{task.task}' ({task.source})")
    if checked:
        check_selection(selection, settings.num_fewshot)
        check_data_files(selection.tasks, settings.data_map)
        check_judges(selection.tasks, settings.judge_model, lambda config: config_arguments(config, settings))
    return selection


def _with_skipped_files(exc: TaskError, index: TaskIndex) -> TaskError:
    """A name the index does not know may be a task whose file could not be read (malformed YAML,
    a missing include, an include cycle): name those files, or the real cause stays hidden."""
    if "unknown" not in str(exc) or not index.problems:
        return exc
    builtin = index.roots[0] if index.roots else ""
    problems = sorted(index.problems, key=lambda p: p[0].startswith(builtin + os.sep))  # include_path first
    shown = " | ".join(why for _, why in problems[:3])
    more = f" (and {len(problems) - 3} more; `python -m evalflow ls` lists them)" if len(problems) > 3 else ""
    return TaskError(f"{exc} Note: {len(problems)} task file(s) could not be read and were skipped: {shown}{more}")


def model_edge(settings: RunSettings, store: CacheStore, model: Any = None) -> CachedModel:
    """The caching front of the model; the model itself is loaded on the first miss only."""
    if model is not None:
        return _object_edge(settings, store, model)
    return config_edge(settings.model, settings, store)


def config_edge(model: Mapping[str, Any], settings: RunSettings, store: CacheStore,
                counts: InferenceCounts | None = None) -> CachedModel:
    """The caching edge of a model config (the scored model's, or a judge's, which may share one
    ``counts``): the model is built on its first cache miss."""
    config = dict(model)
    data = model_identity(config)
    load_args = config_arguments(config, settings)  # checked now rather than at the first miss
    cls = model_class(str(config["type"]))
    edge = CachedModel(store, fingerprint(data), lambda: build_model(load_args), chunk_size=chunk_size(settings, cls),
                       identity_data=data, **({"counts": counts} if counts is not None else {}))
    if settings.workers > 1:  # Ray is imported on the first miss only: a cached run never needs it
        from evalflow.scale.ray_workers import RayDispatch

        replicas = tuple(feature(cls, "replica_configs")(load_args, settings.workers))
        edge.dispatch = RayDispatch(load_args, settings.workers, settings.worker_resources, settings.ray_address,
                                    replica_args=replicas, overlap=bool(feature(cls, "ANSWERS_EACH")))
    return edge


def config_arguments(config: Mapping[str, Any], settings: RunSettings) -> dict[str, Any]:
    """``type`` and the constructor's arguments of a model config, checked against its class."""
    return {"type": config["type"], **model_arguments(model_class(str(config["type"])), config, run_values(settings))}


def judge_edges(settings: RunSettings, store: CacheStore) -> JudgeEdges:
    """The judges' edges, built per judge identity as the tasks ask for them (evalflow.judges)."""
    return JudgeEdges(lambda config, counts: config_edge(config, settings, store, counts), settings.judge_model)


def run_values(settings: RunSettings) -> dict[str, Any]:
    """The run settings a model class may ask for in ``RUN_SETTINGS`` (its constructor takes them)."""
    return {name: getattr(settings, name) for name in ("batch_size", "max_batch_size", "seed")}


def _object_edge(settings: RunSettings, store: CacheStore, model: Any) -> CachedModel:
    """A model object built by the caller: cached under its ``identity()``, or not at all."""
    if settings.workers > 1:
        raise ConfigError(
            f"workers={settings.workers} builds one model per Ray worker from a model config; a model "
            "object passed to evaluate() cannot be replicated. Pass a config (model={'type': ...}) or workers=1."
        )
    identity = feature(model, "identity")
    data = identity()
    if data is None:
        why = "has no identity()"
    elif getattr(identity, "__self__", None) is type(model):  # a classmethod: it names a config, not this object
        why = ("has a classmethod identity(), which cannot see the object's own settings (two objects built "
               "differently would share answers; pass its config, evaluate(task, {'type': ..., ...}), to cache them)")
    else:
        why = ""
    if why:
        log.warning(
            "model object %s %s: its responses and every stage scored from them (inference, filters, metrics, "
            "aggregate) are computed on every run and never cached; give it an identity() method returning plain "
            "data (e.g. its name and weights' hash) to cache them", type(model).__name__, why,
        )
        return CachedModel(store, None, lambda: model, chunk_size=chunk_size(settings, model))
    return CachedModel(store, fingerprint(data), lambda: model, chunk_size=chunk_size(settings, model), identity_data=data)


def chunk_size(settings: RunSettings, model: Any) -> int:
    """The run's ``chunk_size``, else the default for the model's (a class or an object) kind."""
    return chunks.chunk_size(settings.chunk_size, bool(feature(model, "ANSWERS_EACH")))


def count_cached_stages(outputs: Mapping[str, Mapping[str, Any]], events: list[StageEvent], edge: CachedModel,
                        judges: JudgeEdges | None = None, summaries: Mapping[str, TaskSummary] | None = None) -> None:
    """A task whose inference stage (or judge_inference stage) was served whole from the stage
    cache never asked the edge: count its requests as cached, so the manifest says what the run
    reused (from the task's summary when there is one: the answers are then not decoded)."""
    for event in events:
        if event.stage == "inference" and event.hit:
            summary = (summaries or {}).get(event.task)
            edge.counts.served_by_stage(summary.requests if summary is not None
                                        else len(outputs[event.task]["inference"].values))
        if event.stage == "judge_inference" and event.hit and judges is not None:
            judges.counts.served_by_stage(len(outputs[event.task]["judge_inference"].values))


def task_settings(task: TaskConfig, settings: RunSettings, model_identity_key: str | None) -> dict[str, Any]:
    """The run settings as one task's stages see them: the settings schema.py marks ``stage``, and
    those resolved against the task (num_fewshot, samples) or the run (the model, the chat format)."""
    return {
        **{name: getattr(settings, name) for name in stage_settings()},
        "num_fewshot": effective_num_fewshot(task, settings.num_fewshot),  # a task pinned to 0 stays 0
        "fewshot_seed": settings.seed,
        "samples": (settings.samples or {}).get(task.task),
        "model": VOLATILE if model_identity_key is None else model_identity_key,
        "judges": {},  # tasks with judge metrics: per metric its judge's identity (evaluate_tasks sets it)
        "chat": chat_format(settings),
    }


def chat_format(settings: RunSettings) -> dict[str, Any] | None:
    """The model's chat template and lm-eval's chat options, when prompts are chat-formatted."""
    if not settings.apply_chat_template:
        return None
    from evalflow.models.chat import chat_template

    cls = model_class(str(settings.model.get("type")))
    if feature(cls, "CHAT_MESSAGES"):  # a chat API: messages as JSON, the server's template
        return {"messages": True, "fewshot_as_multiturn": settings.fewshot_as_multiturn}
    model_config = feature(cls, "chat_template_source")(settings.model)
    template, special_tokens = chat_template(model_config, settings.chat_template_name)
    if template is None:
        raise ConfigError(
            f"apply_chat_template=true but model {settings.model.get('pretrained', settings.model.get('type'))} "
            "has no chat template (none in its tokenizer config or GGUF metadata); run without it."
        )
    return {"template": template, "fewshot_as_multiturn": settings.fewshot_as_multiturn, "special_tokens": special_tokens}


def evaluate_tasks(
    selection: Selection, settings: RunSettings, store: CacheStore, edge: CachedModel, judges: JudgeEdges,
) -> tuple[dict[str, Mapping[str, Any]], list[StageEvent], dict[str, TaskSummary]]:
    """Every task through the DAG, the model's work pooled across tasks: each task's stages run
    up to inference; the requests of every task whose inference is a cache miss go to the model
    as one pool (``edge.prefetch``: the model is never idle at a task boundary); then each task
    runs on to its end, its inference stage served from the pool (judge calls after it, per task).
    Keys and cache entries are per task, as if each ran alone. Also returns each task's summary
    (output/summary.py: its sizes, memoized, so a cached run need not decode its documents)."""
    edge.images = edge.images or ImageStore(store)  # one table: documents write it, the edge reads it
    runs: list[tuple[TaskRun, dict[str, Any]]] = []
    for task in selection.tasks:
        stage_settings = task_settings(task, settings, edge.identity)
        stage_settings["judges"], judge_resource = judges.for_task(task)
        if stage_settings["num_fewshot"] and task.output_type == "loglikelihood_rolling":
            raise ConfigError(f"task '{task.task}' is loglikelihood_rolling and takes no few-shot examples; use num_fewshot=0")
        log.info("task %s", task.task)
        resources = {"model": edge, "judges": judge_resource, "images": edge.images}
        run = TaskRun(task, stage_settings)
        # the first stage that calls a model, when it must: the scored model's requests are pooled
        # below, and a judge's are counted for this task when it advances again
        run.advance(store, resources, stop_before=("inference", "judge_inference"))
        runs.append((run, resources))
    waiting = [r for r, _ in runs if r.waiting_at == "inference"]
    with frozen_heap():
        if len(waiting) > 1:
            with progress_label(pooled_label("inference", [r.task.task for r in waiting])):
                edge.prefetch([inst.request for r in waiting for inst in r.outputs["instances"]])
        return _finish(runs, store, edge, judges)


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """The objects alive now (every task's documents, prompts and requests: millions in a large
    suite) left out of Python's cyclic garbage collection until the block ends. They outlive the
    block anyway, and a full collection walks all of them holding the GIL, pausing every thread,
    the served client's event loop included, for ~0.35 s at mmlu's 4,560 requests (measured: the
    servers' slots all idle meanwhile). Objects made inside the block are collected as ever (and
    garbage already there when it began, once it ends)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _finish(runs: list[tuple[TaskRun, dict[str, Any]]], store: CacheStore, edge: CachedModel, judges: JudgeEdges,
            ) -> tuple[dict[str, Mapping[str, Any]], list[StageEvent]]:
    """Each task run on to its end (inference from the pool, then judges and scoring), with the
    request counts of its own model stages."""
    outputs: dict[str, Mapping[str, Any]] = {}
    events: list[StageEvent] = []
    summaries: dict[str, TaskSummary] = {}
    for run, resources in runs:
        before, judged = dataclasses.replace(edge.counts), dataclasses.replace(judges.counts)
        run.advance(store, resources)
        summary = summaries[run.task.task] = cached_summary(run.outputs, {e.stage: e.key for e in run.events}, store)
        for warning in fewshot_warnings(run.task, summary.fewshot_split, run.settings["num_fewshot"]):
            log.warning(warning)
        outputs[run.task.task] = run.outputs
        for e in run.events:
            e = _with_request_counts(e, before, edge.counts, "inference")
            events.append(_with_request_counts(e, judged, judges.counts, "judge_inference"))
    return outputs, events, summaries


def _with_request_counts(event: StageEvent, before: InferenceCounts, after: InferenceCounts, stage: str) -> StageEvent:
    """The inference (or judge_inference) event of one task, with how many of its requests the model answered."""
    if event.stage != stage or event.hit:
        return event
    counts = {f: getattr(after, f) - getattr(before, f) for f in ("requests", "computed", "cached")}
    return dataclasses.replace(event, detail=counts)


def evaluate(
    task: str | list[str],
    model: str | Mapping[str, Any] | Any = None,
    *,
    output_dir: str | Path | None = None,
    overrides: list[str] | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Run an evaluation from Python; returns lm-eval's results dict.

    ``model`` is a preset name (``conf/model/<name>.yaml``), a config mapping with ``type`` (laid
    over the preset of that type when there is one, so it takes the preset's keys only, as
    ``model.KEY=VALUE`` on the command line; a type without a preset gets the mapping's keys
    alone), or a model object implementing ``loglikelihood``, ``loglikelihood_rolling`` and
    ``generate_until`` (:class:`evalflow.LanguageModel` or duck-typed; give it an ``identity()``
    method returning plain data to have its responses cached: its ``name`` is the model name in
    results.json). None: the command line's default (``conf/config.yaml``: SmolLM2). Other keyword
    arguments are run settings (``num_fewshot=5, limit=50, cache_dir=...``); a bad preset, setting
    or model key raises the command line's :class:`~evalflow.errors.ConfigError`.

    With ``output_dir`` the run folder holds the snapshot a command-line run writes
    (``.hydra/config.yaml``), so ``python -m evalflow --config-dir DIR/.hydra --config-name config``
    reproduces it; a model object is recorded by its class and identity, which a snapshot cannot
    re-create (reproducing it says so).
    """
    from evalflow.config.compose import compose_run_config, typed_preset
    from evalflow.settings import settings_from_config

    preset = model if isinstance(model, str) else None
    mapping = model if isinstance(model, Mapping) else None
    model_object = None if model is None or isinstance(model, (str, Mapping)) else model
    cfg = compose_run_config(task=task, preset=preset, overrides=overrides or [], values=settings, model=mapping,
                             has_model_object=model_object is not None)
    settings_obj = settings_from_config(cfg)
    folder = Path(output_dir) if output_dir else None
    if folder is not None:
        ensure_fresh(folder, "output_dir")
        write_snapshot(folder, cfg, model_object, settings_obj.data_map_file)
    typed = typed_preset([f"model={preset}", *(overrides or [])]) if preset else None
    return run(settings_obj, folder, model=model_object, preset=typed)
