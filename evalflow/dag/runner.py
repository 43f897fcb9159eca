"""Runs one task through the pipeline: plan every key first, then compute only the misses.

Keys depend on upstream *keys*, never on upstream values, so the whole plan (and the "why did this
stage re-run" explanation) is known before anything is loaded or computed.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from evalflow.cache.fingerprint import fingerprint
from evalflow.cache.store import MISSING, CacheStore
from evalflow.dag.node import Node
from evalflow.dag.pipeline import ANSWERING, OUTPUTS, PIPELINE, REQUESTS
from evalflow.errors import EvalflowError
from evalflow.scale.progress import progress_label
from evalflow.taskspec.format.spec import TaskConfig

log = logging.getLogger(__name__)


class Volatile:
    """A run setting's value that has no stable identity (a model object without ``identity()``).

    Every stage that reads it, directly or through its upstream stages, is computed on every run
    and never read from or written to the cache: with no identity, two different models would
    otherwise share one key and the second would be served the first one's results.
    """

    def __repr__(self) -> str:
        return "<volatile>"


VOLATILE = Volatile()


@dataclass(frozen=True)
class PlannedStage:
    node: Node
    key: str | None  # None: the stage depends on a VOLATILE setting and is never cached
    inputs: Mapping[str, Any]


@dataclass(frozen=True)
class StageEvent:
    """One line of the manifest: whether a stage was served from the cache, and how long it took."""

    task: str
    stage: str
    key: str | None
    hit: bool
    seconds: float
    inputs: Mapping[str, Any] = field(default_factory=dict)  # what the key hashes (for `explain`)
    detail: Mapping[str, Any] = field(default_factory=dict)  # e.g. inference's request counts


def plan(
    task: TaskConfig,
    settings: Mapping[str, Any],
    pipeline: tuple[Node, ...] = PIPELINE,
    upstream_keys: Mapping[str, str | None] | None = None,
) -> list[PlannedStage]:
    """Every node's key, in order (``upstream_keys``: keys already planned, for the output nodes)."""
    keys: dict[str, str | None] = dict(upstream_keys or {})
    planned = []
    volatile = {name for name, value in settings.items() if value is VOLATILE}
    for node in pipeline:
        if node.applies is not None and not node.applies(task):
            continue
        if volatile & set(node.run_settings) or any(u in keys and keys[u] is None for u in node.upstream):
            keys[node.name] = None
            planned.append(PlannedStage(node, None, {}))
            continue
        inputs = node.key_inputs(task, settings, keys)
        keys[node.name] = f"{node.name}:{fingerprint(inputs)}"
        planned.append(PlannedStage(node, keys[node.name], inputs))
    return planned


def unread_nodes(recompute: str | None, nodes: tuple[Node, ...] = PIPELINE + OUTPUTS) -> frozenset[str]:
    """The nodes a run computes anew rather than reading from the cache, for its ``recompute``
    setting: none; ``answers``: the model stages (:data:`ANSWERING`) and every node downstream of
    them, which a recomputed answer may change (keys depend on upstream keys, not values, so a
    filter read from the cache would be the old answer's); ``requests``: :data:`REQUESTS`, lm-eval's
    request cache (rebuilt from the same keys, they are the same values, so what is downstream
    stays valid); ``all``: every node.

    >>> sorted(unread_nodes("answers"))  # doctest: +NORMALIZE_WHITESPACE
    ['aggregate', 'clusters', 'filters', 'generations', 'inference', 'judge_inference', 'judge_requests',
     'metrics', 'samples', 'summary']
    """
    if recompute is None:
        return frozenset()
    if recompute == "all":
        return frozenset(n.name for n in nodes)
    if recompute == "requests":
        return REQUESTS
    unread = set(ANSWERING)
    for node in nodes:  # in order: a node's upstream nodes come before it
        if unread & set(node.upstream):
            unread.add(node.name)
    return frozenset(unread)


class StageOutputs(Mapping[str, Any]):
    """One task's stage outputs by stage name. A stage served from the cache is decoded when it is
    first used, not when it is found: a fully cached mmlu run needs its aggregates and its cached
    samples text, not the 45 MB of prompts its instances stage holds. A value whose entry was
    verified but fails to decode is computed then from its upstream stages (and stored again)."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._deferred: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {}
        self.node_keys: dict[str, str | None] = {}  # the output nodes' cache keys (a writer may copy a stored text out)

    def set(self, name: str, value: Any) -> None:
        self._values[name] = value

    def defer(self, name: str, load: Callable[[], Any], compute: Callable[[], Any]) -> None:
        self._deferred[name] = (load, compute)

    def __getitem__(self, name: str) -> Any:
        if name not in self._values:
            if name not in self._deferred:
                raise KeyError(name)
            load, compute = self._deferred.pop(name)
            value = load()
            self._values[name] = compute() if value is MISSING else value
        return self._values[name]

    @property
    def waiting(self) -> tuple[str, ...]:
        """The stages served from the cache and not used (so not decoded) so far."""
        return tuple(self._deferred)

    def __iter__(self) -> Iterator[str]:
        return iter([*self._values, *self._deferred])

    def __len__(self) -> int:
        return len(self._values) + len(self._deferred)

    def __contains__(self, name: object) -> bool:
        return name in self._values or name in self._deferred


def execute(
    task: TaskConfig,
    settings: Mapping[str, Any],
    store: CacheStore,
    resources: Mapping[str, Any],
    pipeline: tuple[Node, ...] = PIPELINE,
) -> tuple[StageOutputs, list[StageEvent]]:
    """Every stage's output for ``task`` and the hit/miss events, reusing cached outputs; the
    output nodes (:data:`~evalflow.dag.pipeline.OUTPUTS`) are computed, or read, when first used.

    ``resources`` are values a stage receives that are not data (the model edge); their identity
    is already in ``settings``. Cached outputs are checked now and decoded on first use
    (:class:`StageOutputs`).
    """
    run = TaskRun(task, settings, pipeline)
    run.advance(store, resources)
    return run.outputs, run.events


@dataclass
class TaskRun:
    """One task's way through the pipeline, in steps a scheduler may interleave with other tasks'.

    ``advance(..., stop_before=("inference",))`` runs the stages before inference and stops there if
    inference is a cache miss; the scheduler can then pool several tasks' requests
    (:meth:`evalflow.scale.answer_cache.CachedModel.prefetch`) and ``advance`` each task to its end. Keys,
    cache entries and events are those of :func:`execute`: where a stage runs, never what it is.
    """

    task: TaskConfig
    settings: Mapping[str, Any]
    pipeline: tuple[Node, ...] = PIPELINE
    products: tuple[Node, ...] = OUTPUTS  # read on demand once the stages are done, never an event
    unread: frozenset[str] = frozenset()  # nodes computed anew, not read, and written over (unread_nodes)
    outputs: StageOutputs = field(default_factory=StageOutputs)
    events: list[StageEvent] = field(default_factory=list)
    steps: list[PlannedStage] = field(default_factory=list)
    done: int = 0  # steps finished
    _looked_up: Any = MISSING  # the next step's deferred cached value, when a stop already read it

    def __post_init__(self) -> None:
        self.steps = plan(self.task, self.settings, self.pipeline)

    @property
    def finished(self) -> bool:
        return self.done == len(self.steps)

    @property
    def waiting_at(self) -> str | None:
        """The stage this run stopped before (its output to be computed), or None."""
        return self.steps[self.done].node.name if self._looked_up is _MISS else None

    def advance(self, store: CacheStore, resources: Mapping[str, Any], stop_before: Collection[str] = ()) -> bool:
        """Run steps until the end, or until a step named in ``stop_before`` whose output must be
        computed (a cache hit does not stop). True: stopped there."""
        if "images" not in resources:  # a view of this same store: images live beside the stages' results
            from evalflow.cache.image_store import ImageStore

            resources = {**resources, "images": ImageStore(store)}
        while not self.finished:
            step = self.steps[self.done]
            t0 = time.perf_counter()
            if self._looked_up is not MISSING:
                load, self._looked_up = self._looked_up, MISSING
            else:
                load = self._lookup_deferred(store, step)
            if load is MISSING and step.node.name in stop_before:
                self._looked_up = _MISS
                return True
            hit = load is not MISSING and load is not _MISS
            compute = self._computer(step, store, resources)
            if hit:
                self.outputs.defer(step.node.name, load, compute)
            else:
                with progress_label(f"{step.node.name} {self.task.task}"):  # a model's progress lines name the task
                    self.outputs.set(step.node.name, compute())
            seconds = time.perf_counter() - t0
            self.events.append(
                StageEvent(self.task.task, step.node.name, step.key, hit, round(seconds, 6), step.inputs)
            )
            log.debug("%s/%s %s in %.3fs", self.task.task, step.node.name, "hit" if hit else "computed", seconds)
            self.done += 1
            if self.finished:
                self._defer_products(store, resources)
        return False

    def _defer_products(self, store: CacheStore, resources: Mapping[str, Any]) -> None:
        """The output nodes whose upstream stages all ran, keyed like stages: looked up in the
        cache when first read, else computed from their stages' outputs then (and stored)."""
        keys = {step.node.name: step.key for step in self.steps}
        products = tuple(n for n in self.products if all(u in keys for u in n.upstream))
        for step in plan(self.task, self.settings, products, keys):
            key = None if step.node.name in self.unread else step.key
            self.outputs.defer(
                step.node.name, functools.partial(_lookup, store, key), self._computer(step, store, resources)
            )
            self.outputs.node_keys[step.node.name] = key  # None: no stored text to copy out

    def _lookup_deferred(self, store: CacheStore, step: PlannedStage) -> Any:
        """The step's cached value (deferred), or MISSING: always for a node computed anew."""
        if step.key is None or step.node.name in self.unread:
            return MISSING
        return store.get_deferred(step.key)

    def _computer(self, step: PlannedStage, store: CacheStore, resources: Mapping[str, Any]) -> Callable[[], Any]:
        """Computes the step's value and stores it (over the entry there for a node computed anew)."""
        return functools.partial(
            _compute,
            step,
            self.task,
            self.settings,
            self.outputs,
            store,
            resources,
            self.pipeline,
            step.node.name in self.unread,
        )


def finish(
    run: TaskRun, store: CacheStore, resources: Mapping[str, Any], counts: Mapping[str, Any]
) -> list[StageEvent]:
    """``run`` advanced to its end, every kind of run's last step per task: its events, those of
    the model stages named in ``counts`` (stage name → the live request counts of the edge that
    stage asks, e.g. ``{"inference": edge.counts}``) with how many requests the task sent."""
    before = {stage: dataclasses.replace(c) for stage, c in counts.items()}
    run.advance(store, resources)
    return [with_request_counts(e, before[e.stage], counts[e.stage]) if e.stage in counts else e for e in run.events]


def with_request_counts(event: StageEvent, before: Any, after: Any) -> StageEvent:
    """A model stage's event with the requests it sent, answered and found cached (the counts'
    difference around it); a stage served whole from the cache sent none."""
    if event.hit:
        return event
    return dataclasses.replace(
        event, detail={f: getattr(after, f) - getattr(before, f) for f in ("requests", "computed", "cached")}
    )


class _Miss:
    """A lookup already made and missed (not MISSING, which means not looked up yet)."""


_MISS = _Miss()


def _lookup(store: CacheStore, key: str | None) -> Any:
    """``key``'s stored value, or MISSING (always, for a node without a key)."""
    load = store.get_deferred(key) if key is not None else MISSING
    return MISSING if load is MISSING else load()


def _compute(
    step: PlannedStage,
    task: TaskConfig,
    settings: Mapping[str, Any],
    outputs: Mapping[str, Any],
    store: CacheStore,
    resources: Mapping[str, Any],
    pipeline: tuple[Node, ...],
    replace: bool = False,
) -> Any:
    """Run one stage on its upstream outputs, and store what it returns (when it has a key;
    ``replace``: over the entry there, which the run did not read)."""
    try:
        value = _call(step.node, task, settings, outputs, resources, pipeline)
    except EvalflowError as exc:
        located = _in_task(exc, task, step.node.name)
        if located is exc:
            raise
        raise located from exc
    if step.key is not None and isinstance(value, str):  # a text (samples): stored as its UTF-8 bytes
        store.put_text(step.key, value.encode("utf-8"), tag=step.node.name, replace=replace)
    elif step.key is not None:
        store.put(step.key, value, tag=step.node.name, replace=replace)
    return value


def _in_task(exc: EvalflowError, task: TaskConfig, stage: str) -> EvalflowError:
    """The error, prefixed with the task and its file when the message does not name them."""
    text = str(exc)
    if (task.source and task.source in text) or f"'{task.task}'" in text:
        return exc
    try:
        return type(exc)(f"task '{task.task}' ({task.source or 'no file'}), stage {stage}: {text}")
    except TypeError:  # an error class with its own constructor: keep it as it is
        return exc


def _call(
    node: Node,
    task: TaskConfig,
    settings: Mapping[str, Any],
    outputs: Mapping[str, Any],
    resources: Mapping[str, Any],
    pipeline: tuple[Node, ...],
) -> Any:
    """Call the stage with its declared inputs only, matched to its parameter names."""
    fn = node.fn()
    params = list(inspect.signature(fn).parameters)
    by_name = {n.name: n for n in pipeline}
    available: dict[str, Any] = {"task": node.view(task)}
    for up in node.upstream:
        if up in outputs:  # an upstream stage that does not apply to the task: the parameter's default
            available[by_name[up].output] = outputs[up]
    for s in node.run_settings:
        available[s] = resources.get(s, settings[s])
    for r in node.resources:
        if r in resources:  # else the function's default (a run without it: a rescore, a check)
            available[r] = resources[r]
    signature = inspect.signature(fn).parameters
    missing = [p for p in params if p not in available and signature[p].default is inspect.Parameter.empty]
    if missing:
        raise TypeError(f"stage {node.name} wants {missing}, which its node does not declare")
    return fn(**{p: available[p] for p in params if p in available})
