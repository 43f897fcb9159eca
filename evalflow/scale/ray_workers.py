"""``workers>1``: one run's cache misses answered by Ray actors, each a replica of the model.

    python -m evalflow model=hf model.pretrained=... task=mmlu workers=8 worker_resources='{num_gpus: 1}'
    python -m evalflow ... workers=16 ray_address=auto        # join a running Ray cluster

The driver (the DAG process) keeps planning, leasing and persisting exactly as with one worker;
:class:`RayDispatch` only replaces *where* a chunk is answered. Each actor builds the model once,
at its start, and keeps it (and the model's prefix memo) for the whole run. Every actor has up to
two chunks queued (a served model's: four), so it never waits for the driver. An actor streams
each chunk's answers back as its model hands them over (``dispatch.answered``: batch by batch for a
model with ``answer_parts``, so the driver saves them as they come and a killed run loses the
batches in flight, not whole chunks). An actor that dies (killed, node lost, out of memory) fails
its queued chunks: the requests of theirs not yet answered are dealt again, to a replacement actor;
only the driver writes the cache. A served model's per-server counts travel with the answers
(``Done.served``), so those of an actor that died are the ones it answered before. Ray is
imported here only, on the first cache miss of a run with ``workers>1``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from evalflow.core.records import Request
from evalflow.errors import ConfigError, ModelError
from evalflow.scale.dispatch import Chunk, Done, answered

log = logging.getLogger(__name__)

QUEUED_PER_WORKER = 2  # one chunk computing, one waiting: an actor never idles on the driver
# a served model's replica answers its queued chunks at once, oldest requests first: its small
# chunks (models.api.served: 64 requests) need a deeper queue, so that while the driver saves a
# finished chunk and the replica tokenizes the next (~10-70 ms on a loaded machine) the server
# still has ~3 chunks of requests waiting; the replicas still end within about one chunk of each
# other, as a chunk is dealt to whichever replica finished one
QUEUED_OVERLAPPING = 4
# Ray's own actor options, and the cluster resource each draws on; other keys are custom resources
ACTOR_OPTIONS = {"num_cpus": "CPU", "num_gpus": "GPU", "memory": "memory"}


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "workers>1 runs model replicas as Ray actors, and Ray is not installed: "
            "pip install 'evalflow[ray]' (or pip install ray), or run with workers=1."
        ) from None
    return ray


class ModelReplica:
    """The actor body: builds the model from its config once, then answers chunks."""

    def __init__(self, load_args: Mapping[str, Any], index: int) -> None:
        from evalflow.models.registry import build_model

        t0 = time.perf_counter()
        self.model = build_model(dict(load_args))
        self.load_seconds = time.perf_counter() - t0
        self.name = f"w{index}@{socket.gethostname()}:{os.getpid()}"
        self.reported: dict[str, int] = {}  # the served model's counts as last sent to the driver
        self.lock = threading.Lock()  # chunks answered at once (overlap) report from several threads

    def ready(self) -> tuple[str, float]:
        return self.name, self.load_seconds

    def unreported(self) -> dict[str, int]:
        """HTTP requests each server answered since the last report (a served model; else none),
        now reported: sent with each :class:`Done`, so the driver holds them even if this actor
        dies, and asked once more at the end for what came after the last."""
        from evalflow.models.protocol import feature

        with self.lock:
            counts = dict(feature(self.model, "served_counts")() or {})
            fresh = {url: n - self.reported.get(url, 0) for url, n in counts.items() if n > self.reported.get(url, 0)}
            self.reported = counts
        return fresh

    def answer(self, rtype: str, chunk: Chunk) -> Iterator[Done]:
        """One chunk's answers as the model hands them back, called as a Ray streaming generator
        (``num_returns="streaming"``): each :class:`Done` reaches the driver as it is yielded, a
        batch's answers while the chunk's later batches are still being computed, with the
        servers' counts since the last."""
        for done in answered(self.model, rtype, [chunk], self.name):
            yield dataclasses.replace(done, served=self.unreported())


class _Dealt(NamedTuple):
    """A chunk dealt to an actor (``actor``, of generation ``gen``), and the keys of it answered
    so far: what is dealt again if the actor dies."""

    actor: int  # not `index`, which would shadow tuple.index
    gen: int
    chunk: Chunk
    answered: set[str]

    def rest(self) -> list[tuple[str, Request]]:
        return [(k, r) for k, r in self.chunk if k not in self.answered]


def check_reachable(address: str | None, timeout: float = 5.0) -> None:
    """Refuse a ``HOST:PORT`` where nothing listens: Ray itself retries such an address for
    minutes, printing a warning every few seconds, before it gives up. (``auto`` and ``ray://``
    client addresses are left to Ray.)"""
    if not address or address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"ray_address={address!r} is not HOST:PORT (e.g. 10.0.0.1:6379), auto, or ray://HOST:PORT.")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConfigError(
            f"ray_address={address}: no Ray cluster answers there ({exc.strerror or exc}). Start one on that "
            f"host with `ray start --head --port={port}`, use ray_address=auto to join the cluster started on "
            "this machine, or leave ray_address unset to start a local Ray for this run."
        ) from None


def shortfall(options: Mapping[str, Any], workers: int, cluster: Mapping[str, float]) -> dict[str, tuple[float, float]]:
    """The resources ``workers`` actors with ``options`` need beyond what ``cluster`` has in total:
    name -> (needed, available).

    >>> shortfall({"num_cpus": 1}, 3, {"CPU": 2.0})
    {'CPU': (3, 2.0)}
    """
    per_actor = {ACTOR_OPTIONS[k]: v for k, v in options.items() if k in ACTOR_OPTIONS}
    per_actor.update(options.get("resources", {}))
    return {
        name: (workers * amount, cluster.get(name, 0.0))
        for name, amount in per_actor.items()
        if workers * amount > cluster.get(name, 0.0)
    }


def actor_options(resources: Mapping[str, Any]) -> dict[str, Any]:
    """``worker_resources`` as Ray actor options: num_cpus/num_gpus/memory as such, any other key
    as a custom resource. One CPU per replica unless said otherwise."""
    options: dict[str, Any] = {"num_cpus": 1}
    custom = {}
    for key, value in resources.items():
        if key in ACTOR_OPTIONS:
            options[key] = value
        else:
            custom[key] = value
    if custom:
        options["resources"] = custom
    return options


@dataclass
class RayDispatch:
    """Deals chunks to ``workers`` Ray actors; started on the first ``map``, ended by ``close``.
    ``replica_args[i]``, when given, is replica i's model config instead of ``load_args`` (one
    server each, for a served model with a list of base URLs)."""

    load_args: Mapping[str, Any]
    workers: int
    resources: Mapping[str, Any] = field(default_factory=dict)
    address: str | None = None
    max_replacements: int | None = None  # actor deaths tolerated per run (default 2 x workers)
    startup_seconds: float = 0.0  # Ray start (if started here) plus the slowest actor's model load
    replaced: int = 0
    replica_args: tuple[Mapping[str, Any], ...] = ()
    # the model answers requests as they arrive, several chunks at once (a served model): each
    # actor then runs its queued chunks concurrently (threads), so the next chunk is tokenized and
    # its requests wait for the server's free slots while the one before it is answered, instead
    # of the server draining at every chunk boundary; a model of weights answers one at a time
    overlap: bool = False
    # HTTP requests per server, as the driver received them from every actor, dead ones included
    _served: dict[str, int] = field(default_factory=dict)
    _actors: dict[int, tuple[int, Any]] = field(default_factory=dict)  # index -> (generation, handle)
    _started_ray: bool = False
    _token: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    def map(self, rtype: str, chunks: Iterable[Chunk]) -> Iterator[Done]:
        ray = self._start()
        source = iter(chunks)
        retry: deque[Chunk] = deque()
        inflight: dict[Any, _Dealt] = {}  # a chunk's stream of answers -> where it was dealt
        exhausted = False

        def take() -> Chunk | None:
            nonlocal exhausted
            if retry:
                return retry.popleft()
            chunk = None if exhausted else next(source, None)
            exhausted = chunk is None
            return chunk

        while True:
            self._deal(rtype, inflight, take)
            if not inflight:
                return
            [stream], _ = ray.wait(list(inflight), num_returns=1)
            dealt = inflight[stream]
            try:
                done = ray.get(next(stream))
            except StopIteration:  # the chunk is answered (its last Done says so: chunks=1)
                del inflight[stream]
                continue
            except ray.exceptions.RayActorError as exc:
                del inflight[stream]
                self._lost(dealt, retry, exc)
                continue
            except ray.exceptions.RayTaskError as exc:  # the model raised: the same error here
                raise exc.as_instanceof_cause() from None
            dealt.answered.update(done.keys)
            self._count(done.served)
            yield done

    def _lost(self, dealt: _Dealt, retry: deque[Chunk], exc: BaseException) -> None:
        """A chunk whose actor died: its requests not yet answered (the answered ones are saved)
        are dealt again; the first of the actor's chunks to fail replaces the actor."""
        rest = dealt.rest()
        if rest:
            retry.append(rest)
        if self._actors[dealt.actor][0] == dealt.gen:
            self._replace(dealt.actor, exc)

    def _deal(self, rtype: str, inflight: dict[Any, _Dealt], take: Any) -> None:
        """Top every actor up to ``queued`` chunks, one chunk to each in turn: at the start every
        actor gets its first chunk before any gets its second (leasing a chunk takes a few ms)."""
        dealing = True
        while dealing:
            dealing = False
            for index, (gen, actor) in list(self._actors.items()):
                if sum(1 for d in inflight.values() if (d.actor, d.gen) == (index, gen)) >= self.queued:
                    continue
                chunk = take()
                if chunk is None:
                    return
                stream = actor.answer.options(num_returns="streaming").remote(rtype, list(chunk))
                inflight[stream] = _Dealt(index, gen, chunk, set())
                dealing = True

    @property
    def queued(self) -> int:
        """Chunks dealt to one actor at a time."""
        return QUEUED_OVERLAPPING if self.overlap else QUEUED_PER_WORKER

    def _start(self) -> Any:
        ray = import_ray()
        if self._actors:
            return ray
        t0 = time.perf_counter()
        if not ray.is_initialized():
            check_reachable(self.address)
            try:
                # unset: a Ray of this run's own ("local"); Ray's default (None) would join any cluster
                # this machine runs (RAY_ADDRESS, /tmp/ray/ray_current_cluster), another job's included
                ray.init(
                    address=self.address or "local", include_dashboard=False, namespace="evalflow", log_to_driver=True
                )
            except ConnectionError as exc:  # ray_address=auto with no cluster on this machine
                raise ConfigError(
                    f"ray_address={self.address}: {exc} Start a cluster with `ray start --head`, or leave "
                    "ray_address unset to start a local Ray for this run."
                ) from None
            self._started_ray = True
        self._check_capacity(ray)
        for index in range(self.workers):
            self._actors[index] = (0, self._spawn(ray, index))
        self._wait_ready(ray, [actor for _, actor in self._actors.values()])
        self.startup_seconds = time.perf_counter() - t0
        log.info("%d Ray workers ready in %.1f s", self.workers, self.startup_seconds)
        return ray

    def _check_capacity(self, ray: Any) -> None:
        """Actors the cluster cannot place wait forever without a word: a Ray started for this run
        cannot grow, so that is refused; a joined cluster may have an autoscaler, so it is a warning."""
        short = shortfall(actor_options(self.resources), self.workers, ray.cluster_resources())
        if not short:
            return
        what = ", ".join(f"{need:g} {name} (the cluster has {have:g})" for name, (need, have) in short.items())
        message = f"workers={self.workers} with worker_resources={dict(self.resources)} need {what}"
        if self._started_ray and self.address is None:
            self.close()
            raise ConfigError(
                f"{message}; this run's own local Ray cannot grow, so the actors would wait forever. Lower "
                "workers, ask less per worker (worker_resources='{num_cpus: 0.5}' runs two per CPU), or join a "
                "larger cluster with ray_address."
            )
        log.warning(
            "%s; the workers that do not fit wait until the cluster grows (an autoscaler adding nodes)", message
        )

    def _spawn(self, ray: Any, index: int) -> Any:
        name = f"evalflow-{self._token}-w{index}-{self.replaced}"
        options = actor_options(self.resources)
        if self.overlap:
            options["max_concurrency"] = self.queued
        remote = ray.remote(ModelReplica).options(name=name, **options)
        args = self.replica_args[index] if self.replica_args else self.load_args
        return remote.remote(dict(args), index)

    def _wait_ready(self, ray: Any, actors: list[Any]) -> None:
        try:
            ray.get([actor.ready.remote() for actor in actors])
        except ray.exceptions.RayError as exc:
            self.close()
            raise ModelError(f"a Ray worker could not load the model {dict(self.load_args)}: {exc}") from None

    def _replace(self, index: int, exc: BaseException) -> None:
        ray = import_ray()
        self.replaced += 1
        budget = self.max_replacements if self.max_replacements is not None else 2 * self.workers
        if self.replaced > budget:
            raise ModelError(
                f"Ray workers died {self.replaced} times in this run (last: {exc}); giving up. Check the "
                "workers' memory (worker_resources) and the Ray logs (/tmp/ray/session_latest/logs). "
                "Every answered request is in the cache: a re-run resumes from there."
            )
        log.warning(
            "Ray worker w%d died (%s); its unanswered requests are dealt again to a new worker",
            index,
            type(exc).__name__,
        )
        gen, _ = self._actors[index]
        actor = self._spawn(ray, index)
        self._actors[index] = (gen + 1, actor)
        self._wait_ready(ray, [actor])

    def served_counts(self) -> dict[str, int]:
        """Requests each server answered, summed over every actor of the run: what came with each
        answer the driver received (so an actor that died counts what it answered before), and
        what each live actor's servers answered after its last answer was sent."""
        if self._actors:
            ray = import_ray()
            for _, actor in self._actors.values():
                try:
                    self._count(ray.get(actor.unreported.remote()))
                except ray.exceptions.RayError:
                    continue
        return dict(self._served)

    def _count(self, served: Mapping[str, int]) -> None:
        for url, n in served.items():
            self._served[url] = self._served.get(url, 0) + n

    def close(self) -> None:
        if not self._actors and not self._started_ray:
            return
        ray = import_ray()
        if self._actors:
            self.served_counts()  # what the live actors' servers answered after their last answer
        for _, actor in self._actors.values():
            try:
                ray.kill(actor)
            except Exception:  # already dead: nothing to end
                pass
        self._actors.clear()
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False
