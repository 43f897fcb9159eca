"""The parts every kind of run is built from: its tasks, selected and checked before any model
call, and the caching edges of the models it asks (the scored model's, the judges'). A run
(:mod:`evalflow.run.phases`) and a rescore (:mod:`evalflow.run.rescoring`, which asks only judges) both
build theirs here, as ``show``, ``validate`` and ``decontaminate`` select their tasks here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from evalflow.cache.fingerprint import fingerprint
from evalflow.cache.store import CacheStore
from evalflow.config.schema import RunSettings
from evalflow.errors import ConfigError, TaskError, UnsafeCodeError
from evalflow.judges.judge_models import JudgeEdges, check_judges
from evalflow.models.protocol import LanguageModel, feature
from evalflow.models.registry import LoadedModels, build_model, model_arguments, model_class, model_identity
from evalflow.run.load_checks import check_selection
from evalflow.run.reasoning import scored_config
from evalflow.run.user_modules import import_user_modules
from evalflow.sandbox.registry import require_sandbox
from evalflow.scale import chunks
from evalflow.scale.answer_cache import CachedModel, InferenceCounts
from evalflow.scoring.code_exec import runs_code
from evalflow.taskspec.catalog.index import Selection, TaskIndex
from evalflow.taskspec.catalog.run_options import apply_run_options
from evalflow.taskspec.data.datamap import check_data_files
from evalflow.taskspec.format.lmeval_seeds import global_seeds

log = logging.getLogger(__name__)


def select_tasks(settings: RunSettings, *, checked: bool = True) -> Selection:
    """The selected tasks; ``checked``: also every load-time check (evalflow.run.load_checks, and that
    every local data file exists), so a task that cannot be scored fails here, before any model
    call (``validate`` checks per task)."""
    import_user_modules(settings.imports)  # what they register must exist before the checks below
    index = TaskIndex.build(settings.include_path, library=settings.task_library)
    try:
        selection = index.resolve(list(settings.tasks), trust_task_code=settings.trust_task_code)
    except TaskError as exc:
        raise _with_skipped_files(exc, index) from exc
    selection = apply_run_options(
        selection, samples=settings.samples, predict_only=settings.predict_only, metadata=settings.metadata
    )
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
    return check_selected(selection, settings) if checked else selection


def check_selected(selection: Selection, settings: RunSettings) -> Selection:
    """``selection`` (of :func:`select_tasks` with ``checked=False``) through the load-time checks
    select_tasks makes, so a caller that selected the tasks once (the lm-eval front door, before
    the run) hands the run that selection instead of selecting again."""
    check_selection(selection, settings.num_fewshot)
    check_data_files(selection.tasks, settings.data_map)
    check_judges(selection.tasks, settings.judge_model, lambda config: config_arguments(config, settings, judge=True))
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


def model_edge(
    settings: RunSettings, store: CacheStore, model: Any = None, loaded: LoadedModels | None = None
) -> CachedModel:
    """The caching front of the model; the model itself is loaded on the first miss only (from
    ``loaded`` when given: a model an earlier run of this process built is lent, not rebuilt)."""
    if model is not None:
        return _object_edge(settings, store, model)
    return config_edge(scored_config(settings), settings, store, loaded=loaded)


def config_edge(
    model: Mapping[str, Any],
    settings: RunSettings,
    store: CacheStore,
    counts: InferenceCounts | None = None,
    judge: bool = False,
    loaded: LoadedModels | None = None,
) -> CachedModel:
    """The caching edge of a model config (the scored model's, or a judge's, which may share one
    ``counts``): the model is built on its first cache miss."""
    config = dict(model)
    data = model_identity(config, run_values(settings, judge))
    load_args = config_arguments(config, settings, judge)  # checked now rather than at the first miss
    cls = model_class(str(config["type"]))
    edge = CachedModel(
        store,
        fingerprint(data),
        lambda: loaded.build(load_args) if loaded is not None else build_model(load_args),
        chunk_size=chunk_size(settings, cls),
        identity_data=data,
        read=settings.recompute is None,
        counts=counts if counts is not None else InferenceCounts(),
    )
    if settings.workers > 1:  # Ray is imported on the first miss only: a cached run never needs it
        from evalflow.scale.ray_workers import RayDispatch

        replicas = tuple(feature(cls, "replica_configs")(load_args, settings.workers))
        edge.dispatch = RayDispatch(
            load_args,
            settings.workers,
            settings.worker_resources,
            settings.ray_address,
            replica_args=replicas,
            overlap=bool(feature(cls, "ANSWERS_EACH")),
        )
    return edge


def config_arguments(config: Mapping[str, Any], settings: RunSettings, judge: bool = False) -> dict[str, Any]:
    """``type`` and the constructor's arguments of a model config, checked against its class."""
    cls = model_class(str(config["type"]))
    return {"type": config["type"], **model_arguments(cls, config, run_values(settings, judge))}


def judge_edges(settings: RunSettings, store: CacheStore) -> JudgeEdges:
    """The judges' edges, built per judge identity as the tasks ask for them (evalflow.judges)."""
    return JudgeEdges(
        lambda config, counts: config_edge(config, settings, store, counts, judge=True), settings.judge_model
    )


def run_values(settings: RunSettings, judge: bool = False) -> dict[str, Any]:
    """The run settings a model class may ask for in ``RUN_SETTINGS`` (its constructor takes them).
    A judge gets no ``think_end_token``: the scored model's answers are cut at it, a judge's are read whole."""
    values = {name: getattr(settings, name) for name in ("batch_size", "max_batch_size", "seed", "think_end_token")}
    return {**values, "think_end_token": None} if judge else values


def _object_edge(settings: RunSettings, store: CacheStore, model: Any) -> CachedModel:
    """A model object built by the caller: cached under its ``identity()``, or not at all."""
    if settings.workers > 1:
        raise ConfigError(
            f"workers={settings.workers} builds one model per Ray worker from a model config; a model "
            "object passed to evaluate() cannot be replicated. Pass a config (model={'type': ...}) or workers=1."
        )
    data, why = object_identity(model)
    if why:
        log.warning(
            "model object %s %s: its responses and every stage scored from them (inference, filters, metrics, "
            "aggregate) are computed on every run and never cached; give it an identity() method returning plain "
            "data (e.g. its name and weights' hash) to cache them",
            type(model).__name__,
            why,
        )
        return CachedModel(store, None, lambda: model, chunk_size=chunk_size(settings, model))
    return CachedModel(
        store,
        fingerprint(data),
        lambda: model,
        chunk_size=chunk_size(settings, model),
        identity_data=data,
        read=settings.recompute is None,
    )


def object_identity(model: Any) -> tuple[Any, str]:
    """What a model object's answers are cached under, or ``(None, why)``: its ``identity()``; for
    an lm-eval model, which has none, the one :mod:`evalflow.models.lm_objects` builds."""
    identity = feature(model, "identity")
    if (
        getattr(identity, "__func__", None) is vars(LanguageModel)["identity"].__func__
    ):  # the contract's default: none of its own
        from evalflow.models.lm_objects import lm_identity

        data, why = lm_identity(model)
        return data, why or ("" if data is not None else "has no identity()")
    data = identity()
    if data is None:
        return None, "has no identity()"
    if getattr(identity, "__self__", None) is type(model):  # a classmethod: it names a config, not this object
        return None, (
            "has a classmethod identity(), which cannot see the object's own settings (two objects built "
            "differently would share answers; pass its config, evaluate(task, {'type': ..., ...}), to cache them)"
        )
    return data, ""


def chunk_size(settings: RunSettings, model: Any) -> int:
    """The run's ``chunk_size``, else the default for the model's (a class or an object) kind."""
    return chunks.chunk_size(settings.chunk_size, bool(feature(model, "ANSWERS_EACH")))


def generation_seed(settings: RunSettings) -> int:
    """Sampled generation's seed: lm-eval's torch seed (``torch_seed``), else ``seed``."""
    return settings.seed if settings.torch_seed is None else settings.torch_seed


def task_rng(settings: RunSettings) -> dict[str, int]:
    """The global RNGs' seeds task code runs under (load_docs' process_docs, metrics): lm-eval's
    ``--seed`` slots 1-3."""
    return global_seeds(settings.random_seed, settings.numpy_seed, generation_seed(settings))
