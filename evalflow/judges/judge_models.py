"""The judge models of a run: each judge metric's model config, identity and caching edge.

A judge metric's ``judge.model`` is a preset name (``conf/model/<name>.yaml``) or a model config
mapping (``{type: hf, pretrained: ...}``, laid over the preset of its type when there is one); the
run's ``judge_model`` setting, when given, replaces it for every judge metric::

    python -m evalflow task=my_judged_task judge_model=smollm2
    python -m evalflow task=my_judged_task \
        judge_model='{type: openai_completions, base_url: http://127.0.0.1:8080/v1, model: smollm2}'

Every judge answers through a :class:`~evalflow.scale.answer_cache.CachedModel`, the scored model's
own edge (per-request cache keyed by the model's identity, chunks persisted as they return, leases
shared between processes, Ray workers): one edge per distinct judge identity, all adding to one
:class:`~evalflow.scale.answer_cache.InferenceCounts` (the manifest's ``judge`` entry). Models are built
on the first judge request that misses the cache, never at load time; their configs are resolved
and checked then (:func:`check_judges`), before any model call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalflow.cache.fingerprint import fingerprint
from evalflow.config.messages import has_preset
from evalflow.config.packaged import conf_dir
from evalflow.errors import ConfigError, EvalflowError, TaskError
from evalflow.judges.judge_metrics import has_judges, judge_specs
from evalflow.scale.answer_cache import CachedModel, InferenceCounts
from evalflow.taskspec.format.spec import TaskConfig

EdgeFactory = Callable[[Mapping[str, Any], InferenceCounts], CachedModel]


def preset_config(name: str, where: str) -> dict[str, Any]:
    """``conf/model/<name>.yaml`` as a plain mapping, its defaults list applied and resolved (read
    directly: a judge is resolved inside a running Hydra app as well as from evaluate())."""
    from omegaconf import OmegaConf

    from evalflow.config.omegaconf_dicts import to_dict
    from evalflow.config.resolvers import register_resolvers

    register_resolvers()

    def raw(preset: str) -> Any:
        path = conf_dir() / "model" / f"{preset}.yaml"
        if not path.is_file():
            names = sorted(p.stem for p in (conf_dir() / "model").glob("*.yaml"))
            raise ConfigError(
                f"{where}: unknown model preset '{preset}'; the presets are {', '.join(names)} (conf/model/). "
                "Give a preset's name or a model config mapping with a type, e.g. {type: hf, pretrained: PATH}."
            )
        cfg: Any = OmegaConf.load(path)
        defaults = list(cfg.pop("defaults", None) or ["_self_"])
        parts = [cfg if d == "_self_" else raw(str(d)) for d in defaults]
        return OmegaConf.merge(*parts) if parts else cfg

    return to_dict(raw(name), resolve=True)


def judge_model_config(value: Any, where: str) -> dict[str, Any]:
    """A judge's model config: a preset's, or a mapping (over its type's preset when there is one)."""
    if isinstance(value, str) and value:
        return preset_config(value, where)
    if isinstance(value, Mapping) and value.get("type"):
        base = preset_config(str(value["type"]), where) if has_preset(value["type"]) else {}
        return {**base, **{str(k): v for k, v in value.items()}}
    raise ConfigError(
        f"{where}: the judge model must be a preset name (judge: {{model: smollm2}}) or a model config "
        f"mapping with a type; got {value!r}. Set it in the judge block or with judge_model=NAME."
    )


@dataclass(frozen=True)
class Judge:
    """One judge metric's model: its config, the plain data of its identity, and its cache key."""

    metric: str
    config: Mapping[str, Any]
    identity_data: Any
    identity: str


def task_judges(task: TaskConfig, judge_model: Any) -> tuple[Judge, ...]:
    """The judges of ``task``'s judge metrics (``judge_model``, when set, overrides each one's
    model); a bad or missing model is one paragraph naming the task, its file and the metric."""
    from evalflow.models.registry import model_identity

    out = []
    for spec in judge_specs(task):
        where = f"task '{task.task}' ({task.source or 'no file'}) metric '{spec.metric}' judge.model"
        chosen = judge_model if judge_model is not None else spec.model
        if chosen is None:
            raise ConfigError(
                f"{where}: no judge model; give one in the judge block (model: smollm2) or on the command "
                "line (judge_model=smollm2)"
            )
        config = judge_model_config(chosen, "judge_model" if judge_model is not None else where)
        try:
            data = model_identity(config)
        except EvalflowError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        out.append(Judge(spec.metric, config, data, fingerprint(data)))
    return tuple(out)


def check_judges(
    tasks: Sequence[TaskConfig], judge_model: Any, check_arguments: Callable[[Mapping[str, Any]], Any]
) -> None:
    """Every judge model resolves and can be built from its config (its constructor's arguments
    bind): load-time, before any model call. ``check_arguments`` raises on a config that cannot."""
    for task in tasks:
        if not has_judges(task):
            continue
        for judge in task_judges(task, judge_model):
            try:
                check_arguments(judge.config)
            except EvalflowError as exc:
                raise TaskError(
                    f"task '{task.task}' ({task.source or 'no file'}) metric '{judge.metric}' judge model: {exc}"
                ) from None


@dataclass
class JudgeEdges:
    """The run's judge edges, one per judge identity, built as tasks need them."""

    make: EdgeFactory
    judge_model: Any = None
    counts: InferenceCounts = field(default_factory=InferenceCounts)
    edges: dict[str, CachedModel] = field(default_factory=dict)
    identities: dict[str, Any] = field(default_factory=dict)  # identity key -> plain data (the manifest's)

    def for_task(self, task: TaskConfig) -> tuple[dict[str, Any], dict[str, CachedModel]]:
        """(the ``judges`` setting: per metric its judge's identity data, what the judge_inference
        key hashes; the ``judges`` resource: per metric its edge)."""
        if not has_judges(task):
            return {}, {}
        settings, edges = {}, {}
        for judge in task_judges(task, self.judge_model):
            if judge.identity not in self.edges:
                self.edges[judge.identity] = self.make(judge.config, self.counts)
                self.identities[judge.identity] = judge.identity_data
            settings[judge.metric] = judge.identity_data
            edges[judge.metric] = self.edges[judge.identity]
        return settings, edges

    def close(self) -> None:
        for edge in self.edges.values():
            edge.close()
