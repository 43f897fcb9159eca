"""One evaluation run, as a few named phases: settings → tasks → model edge → DAG → run folder.

    from evalflow import evaluate
    results = evaluate(task="arith_mc", model="dummy", limit=10)
    results["results"]["arith_mc"]["acc,none"]

The Hydra entry point (``python -m evalflow``) and :func:`evaluate` both end in :func:`run`.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from evalflow.cache.image_store import ImageStore
from evalflow.cache.store import CacheStore
from evalflow.config.schema import RunSettings, stage_settings
from evalflow.dag.runner import VOLATILE, StageEvent, StageOutputs, TaskRun, finish, unread_nodes
from evalflow.errors import ConfigError
from evalflow.judges.judge_models import JudgeEdges
from evalflow.models.modality import refuse_unanswerable
from evalflow.models.protocol import feature
from evalflow.models.registry import LoadedModels, model_class
from evalflow.output.cost import rate_for
from evalflow.output.events import EventsWriter, recorded
from evalflow.output.manifest import cache_facts
from evalflow.output.results import RunRecord, build_results
from evalflow.output.run_folder import ensure_fresh, write_run_folder, write_snapshot
from evalflow.output.run_info import object_model
from evalflow.output.run_summary import cache_line
from evalflow.output.summary import TaskSummary
from evalflow.output.thinking_tokens import CountTokens, token_counter
from evalflow.run.parts import check_selected, generation_seed, judge_edges, model_edge, select_tasks, task_rng
from evalflow.run.precision import precision_subset
from evalflow.run.reasoning import check_reasoning, template_args
from evalflow.run.user_modules import import_user_modules
from evalflow.scale.answer_cache import CachedModel
from evalflow.scale.progress import pooled_label, progress_label
from evalflow.stages.fewshot import evaluated_doc_ids
from evalflow.taskspec.catalog.index import Selection
from evalflow.taskspec.format.spec import TaskConfig
from evalflow.taskspec.prompts.clusters import cluster_ids
from evalflow.taskspec.prompts.fewshot_context import effective_num_fewshot
from evalflow.taskspec.prompts.samplers import fewshot_warnings

log = logging.getLogger(__name__)


def run(
    settings: RunSettings,
    output_dir: Path | None = None,
    model: Any = None,
    preset: str | None = None,
    selection: Selection | None = None,
    loaded: LoadedModels | None = None,
) -> dict[str, Any]:
    """Evaluate ``settings`` and return lm-eval's results dict; write the run folder if given.

    ``model`` is an already-built model object (for embedding); else ``settings.model`` is built
    lazily on the first cache miss. ``preset``: the ``model=`` preset the user named, which a
    refusal names (``smollm2``, not its type ``hf``). ``selection``: the tasks ``settings`` select,
    already selected by the caller (``select_tasks(settings, checked=False)``): checked, not selected again.
    ``loaded``: models built by earlier runs of this process, lent rather than built again (the gate's rounds).
    With a folder, the run's progress is recorded there as it goes (:mod:`evalflow.output.events`).
    """
    if output_dir is not None:
        ensure_fresh(output_dir)
    name = type(model).__name__ if model is not None else preset or str(settings.model["type"])
    with recorded(output_dir, settings.tasks, name) as progress:
        return _run(settings, output_dir, model, preset, selection, progress, loaded)


def _run(
    settings: RunSettings,
    output_dir: Path | None,
    model: Any,
    preset: str | None,
    selection: Selection | None,
    progress: EventsWriter | None,
    loaded: LoadedModels | None = None,
) -> dict[str, Any]:
    """:func:`run`'s work, its progress recorded by ``progress`` (None: no run folder)."""
    started = time.time()
    if model is None:  # import the model's class first: a model.type module may register metrics too,
        import_user_modules(settings.imports)  # and a module of imports= may register the model type
        model_class(str(settings.model["type"]))
    selection = select_tasks(settings) if selection is None else check_selected(selection, settings)
    answering = model if model is not None else model_class(str(settings.model["type"]))
    answering_name = type(model).__name__ if model is not None else preset or str(settings.model["type"])
    refuse_unanswerable(selection.tasks, answering, answering_name)
    check_reasoning(settings, answering, answering_name)
    store = CacheStore(settings.cache_dir)
    try:
        edge = model_edge(settings, store, model, loaded)
        ran = settings.model if model is None else object_model(model, edge.identity_data)
        judges = judge_edges(settings, store)
        try:
            rate_for(settings.prices, ran)  # a prices file without the run's model: refused before any model call
            counter = token_counter(settings.model if model is None else None)
            settings, outputs, events, summaries = evaluate_counted(selection, settings, store, edge, judges, counter)
        finally:
            edge.close()
            judges.close()
        record = RunRecord(
            settings,
            selection,
            outputs,
            events,
            edge.counts,
            started,
            time.time(),
            edge.identity_data,
            ran,
            judge=judges.counts if judges.edges else None,
            judge_identities=judges.identities,
            summaries=summaries,
        )
        results = build_results(record, store)
        if output_dir is not None:
            write_run_folder(output_dir, record, results, store, before_results=progress.end if progress else None)
            if settings.explain:
                _print_explanation(output_dir)
        else:  # a command line prints this line from the run folder's manifest; a Python run may have none
            log.info(cache_line(cache_facts(record)))
        return results
    finally:
        store.close()


def _print_explanation(output_dir: Path) -> None:
    """``explain=true``: the lines of ``python -m evalflow explain`` for this run, on stderr."""
    import sys

    from evalflow.insight.explanation import explain

    lines = explain(output_dir)
    print("\n".join(lines) if lines else "explain: every stage was served from the cache", file=sys.stderr)


Evaluated = tuple[dict[str, StageOutputs], list[StageEvent], dict[str, TaskSummary]]


def evaluate_counted(
    selection: Selection,
    settings: RunSettings,
    store: CacheStore,
    edge: CachedModel,
    judges: JudgeEdges,
    counter: CountTokens | None,
) -> tuple[RunSettings, dict[str, StageOutputs], list[StageEvent], dict[str, TaskSummary]]:
    """The tasks through the DAG, with what the model and the stage cache answered counted. With
    ``stop_at_stderr``, rounds of the same run path first (``run/precision.py``), then the final run
    over the documents each task had seen when it stopped, counted as the run; its settings are returned."""

    def evaluated(s: RunSettings) -> Evaluated:
        outputs, events, summaries = evaluate_tasks(selection, s, store, edge, judges, counter)
        count_cached_stages(outputs, events, edge, judges, summaries)
        return outputs, events, summaries

    if settings.stop_at_stderr is None:
        return (settings, *evaluated(settings))
    final = precision_subset(settings, selected_doc_ids(selection, settings, store, edge), lambda s: evaluated(s)[0])
    return (final, *edge.recount(lambda: evaluated(final)))


def count_cached_stages(
    outputs: Mapping[str, Mapping[str, Any]],
    events: list[StageEvent],
    edge: CachedModel,
    judges: JudgeEdges | None = None,
    summaries: Mapping[str, TaskSummary] | None = None,
) -> None:
    """A task whose inference stage (or judge_inference stage) was served whole from the stage
    cache never asked the edge: count its requests as cached, so the manifest says what the run
    reused (from the task's summary when there is one: the answers are then not decoded)."""
    for event in events:
        if event.stage == "inference" and event.hit:
            summary = (summaries or {}).get(event.task)
            edge.counts.served_by_stage(
                summary.requests if summary is not None else len(outputs[event.task]["inference"].values)
            )
        if event.stage == "judge_inference" and event.hit and judges is not None:
            judges.counts.served_by_stage(len(outputs[event.task]["judge_inference"].values))


def task_settings(task: TaskConfig, settings: RunSettings, model_identity_key: str | None) -> dict[str, Any]:
    """The run settings as one task's stages see them: the settings schema.py marks ``stage``, and
    those resolved against the task (num_fewshot, samples) or the run (the model, the chat format)."""
    return {
        **{name: getattr(settings, name) for name in stage_settings()},
        "num_fewshot": effective_num_fewshot(task, settings.num_fewshot),  # a task pinned to 0 stays 0
        "fewshot_seed": settings.seed,
        # sampled generation (the instances stage's Request.seed): lm-eval's torch seed, else seed
        "seed": generation_seed(settings),
        "task_rng": task_rng(settings),
        "samples": (settings.samples or {}).get(task.task),
        "subset": (settings.subset or {}).get(task.task),
        "model": VOLATILE if model_identity_key is None else model_identity_key,
        "judges": {},  # tasks with judge metrics: per metric its judge's identity (evaluate_tasks sets it)
        "chat": chat_format(settings),
    }


def chat_format(settings: RunSettings) -> dict[str, Any] | None:
    """The model's chat template and lm-eval's chat options, when prompts are chat-formatted."""
    if not settings.apply_chat_template:
        return None
    from evalflow.taskspec.prompts.chat_templates import chat_template, unread_template_args

    cls = model_class(str(settings.model.get("type")))
    if feature(cls, "CHAT_MESSAGES"):  # a chat API: messages as JSON, the server's template
        if settings.chat_template_args:
            raise ConfigError(
                f"chat_template_args={dict(settings.chat_template_args)} but model type "
                f"{settings.model.get('type')} takes chat messages and renders them with its own template "
                "(a server's or a processor's), which evalflow hands no arguments, as lm-eval's does not; "
                "drop chat_template_args, or use a model whose prompts evalflow renders (hf, vllm)."
            )
        return {"messages": True, "fewshot_as_multiturn": settings.fewshot_as_multiturn}
    model_config = feature(cls, "chat_template_source")(settings.model)
    template, special_tokens = chat_template(model_config, settings.chat_template_name)
    if template is None:
        raise ConfigError(
            f"apply_chat_template=true but model {settings.model.get('pretrained', settings.model.get('type'))} "
            "has no chat template (none in its tokenizer config or GGUF metadata); run without it."
        )
    kwargs = template_args(settings) or {}  # chat_template_args, the run's reasoning_effort merged in
    for key in unread_template_args(template, kwargs):
        log.warning(
            "%s=%r: model %s's chat template never reads '%s', so the prompts, and the answers, are what they "
            "are without it (the answers come from the cache where they were computed before)",
            "reasoning_effort"
            if key == "reasoning_effort" and settings.reasoning_effort
            else f"chat_template_args.{key}",
            kwargs[key],
            settings.model.get("pretrained", settings.model.get("type")),
            key,
        )
    args = {"template_args": kwargs} if kwargs else {}
    return {
        "template": template,
        "fewshot_as_multiturn": settings.fewshot_as_multiturn,
        "special_tokens": special_tokens,
        **args,  # absent when unset, so the keys of runs without it stay as they were
    }


def selected_doc_ids(
    selection: Selection, settings: RunSettings, store: CacheStore, edge: CachedModel
) -> dict[str, list[int]]:
    """Each task's documents that ``limit``/``samples`` select, read off its ``load_docs`` stage
    (cached as any run's), before any model call: what ``stop_at_stderr`` orders and samples."""
    edge.images = edge.images or ImageStore(store)
    out = {}
    for task in selection.tasks:
        run = TaskRun(task, task_settings(task, settings, edge.identity), unread=unread_nodes(settings.recompute))
        run.advance(store, {"model": edge, "judges": None, "images": edge.images}, stop_before=("fewshot",))
        docs = run.outputs["load_docs"]
        out[task.task] = evaluated_doc_ids(len(docs.docs), settings.limit, (settings.samples or {}).get(task.task))
    return out


def evaluate_tasks(
    selection: Selection,
    settings: RunSettings,
    store: CacheStore,
    edge: CachedModel,
    judges: JudgeEdges,
    count_tokens: CountTokens | None = None,
) -> tuple[dict[str, StageOutputs], list[StageEvent], dict[str, TaskSummary]]:
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
            raise ConfigError(
                f"task '{task.task}' is loglikelihood_rolling and takes no few-shot examples; use num_fewshot=0"
            )
        log.info("task %s", task.task)
        resources = {"model": edge, "judges": judge_resource, "images": edge.images, "count_tokens": count_tokens}
        run = TaskRun(task, stage_settings, unread=unread_nodes(settings.recompute))
        # the first stage that calls a model, when it must: the scored model's requests are pooled
        # below, and a judge's are counted for this task when it advances again
        run.advance(store, resources, stop_before=("inference", "judge_inference"))
        if task.cluster_key is not None:  # a cluster_key that renders no id: refused before any model call
            cluster_ids(task, run.outputs["load_docs"].docs)
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


def _finish(
    runs: list[tuple[TaskRun, dict[str, Any]]],
    store: CacheStore,
    edge: CachedModel,
    judges: JudgeEdges,
) -> tuple[dict[str, StageOutputs], list[StageEvent], dict[str, TaskSummary]]:
    """Each task run on to its end (inference from the pool, then judges and scoring), with the
    request counts of its own model stages."""
    outputs: dict[str, StageOutputs] = {}
    events: list[StageEvent] = []
    summaries: dict[str, TaskSummary] = {}
    for run, resources in runs:
        task_events = finish(run, store, resources, {"inference": edge.counts, "judge_inference": judges.counts})
        summary = summaries[run.task.task] = TaskSummary.of(run.outputs)
        for warning in fewshot_warnings(run.task, summary.fewshot_split, run.settings["num_fewshot"]):
            log.warning(warning)
        outputs[run.task.task] = run.outputs
        events.extend(task_events)
    return outputs, events, summaries


def evaluate(
    task: str | list[str],
    model: str | Mapping[str, Any] | Any = None,
    *,
    output_dir: str | Path | None = None,
    overrides: list[str] | None = None,
    selection: Selection | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Run an evaluation from Python; returns lm-eval's results dict.

    `evaluate("arith_mc", "dummy", limit=5)["results"]["arith_mc"]["acc,none"]` is the accuracy
    of the command line's `python -m evalflow model=dummy task=arith_mc limit=5`.

    Args:
        task: A task, group or tag name, a list of names, or the path of a task YAML (the command
            line's `task=`).
        model: A preset name (`conf/model/<name>.yaml`); a config mapping with `type`, laid over
            the preset of that type when there is one (so it takes the preset's keys only, as
            `model.KEY=VALUE` on the command line; a type without a preset gets the mapping's keys
            alone); or a model object implementing `loglikelihood`, `loglikelihood_rolling` and
            `generate_until` (a [`LanguageModel`][evalflow.models.protocol.LanguageModel] or duck-typed). Give
            an object an `identity()` method returning plain data to have its responses cached;
            its `name` is the model name in results.json. None: the command line's default
            (`conf/config.yaml`: SmolLM2), never a stand-in.
        output_dir: A fresh folder for the run's files, with the snapshot a command-line run
            writes (`.hydra/config.yaml`), so `python -m evalflow --config-dir DIR/.hydra
            --config-name config` reproduces the run. A model object is recorded by its class and
            identity, which a snapshot cannot re-create (reproducing it says so). None: no folder.
        overrides: Hydra overrides, as on the command line (`["model.dtype=bfloat16"]`).
        selection: The tasks these settings select, already selected by the caller (with
            `evalflow.run.parts.select_tasks(settings, checked=False)`), so they are not selected
            (nor their code announced) twice; None: selected here.
        **settings: Run settings, as on the command line (`num_fewshot=5, limit=50,
            cache_dir=...`); their types and defaults are in `evalflow/config/schema.py`.

    Returns:
        lm-eval 0.4.13's results dict: `results`, `groups`, `configs`, `versions`, `n-shot`,
            `higher_is_better`, `n-samples`, `config`, ...

    Raises:
        ConfigError: A bad preset, setting or model key (the command line's error, naming the
            closest valid names).
        EvalflowError: Any other input evalflow refuses (a task file, a dataset, a model), before
            any model call where it can be found then.
    """
    from evalflow.config.compose import compose_run_config, typed_preset
    from evalflow.config.settings import settings_from_config

    preset = model if isinstance(model, str) else None
    mapping = model if isinstance(model, Mapping) else None
    model_object = None if model is None or isinstance(model, (str, Mapping)) else model
    cfg = compose_run_config(
        task=task,
        preset=preset,
        overrides=overrides or [],
        values=settings,
        model=mapping,
        has_model_object=model_object is not None,
    )
    settings_obj = settings_from_config(cfg)
    folder = Path(output_dir) if output_dir else None
    if folder is not None:
        ensure_fresh(folder, "output_dir")
        write_snapshot(folder, cfg, model_object, settings_obj.data_map_file)
    typed = typed_preset([f"model={preset}", *(overrides or [])]) if preset else None
    return run(settings_obj, folder, model=model_object, preset=typed, selection=selection)
