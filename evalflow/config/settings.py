"""A run's settings as one frozen, validated value, built from the composed Hydra config.

Validation happens here, once, before anything is loaded, so a bad override fails in a second
with a message naming the key and the fix, not an hour later inside a stage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from evalflow.cache.store import default_cache_dir
from evalflow.config.messages import unknown_setting
from evalflow.config.packaged import conf_dir
from evalflow.config.samples_option import parse_samples
from evalflow.config.schema import RECOMPUTE, defaults
from evalflow.errors import ConfigError


@dataclass(frozen=True)
class RunSettings:
    """The settings of evalflow/config/schema.py (their one declaration: types, defaults, meaning),
    validated and parsed; ``task`` is read as ``tasks``, and three values are derived from others
    (``chat_template_name``, ``data_map_file``, and ``cache_dir``'s default location)."""

    model: Mapping[str, Any]
    tasks: tuple[str, ...]
    num_fewshot: int | None
    limit: float | None
    samples: Mapping[str, tuple[int, ...]] | None  # task -> document indices (instead of limit)
    predict_only: bool
    seed: int
    batch_size: int | str
    max_batch_size: int
    gen_kwargs: Mapping[str, Any] | None
    include_path: tuple[str, ...]
    imports: tuple[str, ...]
    data_map: Mapping[str, Any] | None
    data_map_file: str | None  # the map file data_map came from (recorded in the manifest)
    apply_chat_template: bool
    chat_template_name: str | None  # one of a tokenizer's named templates
    fewshot_as_multiturn: bool
    system_instruction: str | None
    think_end_token: str | None
    cache_dir: Path
    recompute: str | None  # None, or one of schema.RECOMPUTE
    bootstrap_iters: int
    log_samples: bool
    trust_task_code: bool
    confirm_unsafe_code: bool
    code_sandbox: str
    chunk_size: int | None  # None: the default for the model's kind (scale.chunks.chunk_size)
    judge_model: Any  # a preset name or a model config mapping; None: each judge block's own model
    explain: bool
    workers: int
    worker_resources: Mapping[str, Any]
    ray_address: str | None


Parse = Callable[[Mapping[str, Any]], Any]


def settings_from_config(cfg: DictConfig | Mapping[str, Any]) -> RunSettings:
    """Every field of :class:`RunSettings`, parsed from the composed config laid over the schema's
    defaults: each field by its parser in ``_PARSERS``, which reads the settings it derives from."""
    data = {**defaults(), **_plain(cfg)}
    return RunSettings(**{f.name: _PARSERS[f.name](data) for f in fields(RunSettings)})


def _plain(cfg: DictConfig | Mapping[str, Any]) -> dict[str, Any]:
    try:
        data = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    except OmegaConfBaseException as exc:  # an interpolation (${...}) that does not resolve
        where = f" (key {exc.full_key})" if getattr(exc, "full_key", None) else ""
        raise ConfigError(
            f"the run config does not resolve{where}: {str(exc).splitlines()[0]}. Fix the "
            "${...} interpolation in the override or YAML."
        ) from None
    data.pop("hydra", None)
    known = defaults()
    for key in data:
        if key not in known:
            raise ConfigError(unknown_setting(str(key)))
    return data  # type: ignore[return-value]


def _tasks(data: Mapping[str, Any]) -> tuple[str, ...]:
    task = data["task"]
    tasks = tuple(str(t) for t in task) if isinstance(task, (list, tuple)) else (str(task),) if task else ()
    if not tasks:
        raise ConfigError("no task given; pass task=<name> (or task=[a,b]); `python -m evalflow ls` lists them")
    return tasks


def _model(data: Mapping[str, Any]) -> Mapping[str, Any]:
    model = data["model"]
    if not isinstance(model, Mapping) or "type" not in model:
        raise ConfigError("model must be a mapping with a `type` key; pick a preset with model=<name> (conf/model/)")
    if model["type"] == "python-object":  # evaluate(model=obj)'s snapshot (output/run_folder.write_snapshot)
        raise ConfigError(
            f"this config's model was a Python object passed to evaluate() (class {model.get('class')}, identity "
            f"{model.get('identity')}); a snapshot cannot re-create an object. Reproduce the run with a model config "
            "(model=<preset>, or model.type=pkg.module:Class and its keys) or call evaluate() with the object again; "
            "the snapshot's other settings stand."
        )
    return model


def _num_fewshot(data: Mapping[str, Any]) -> int | None:
    if data["num_fewshot"] is not None and data["num_fewshot"] < 0:
        raise ConfigError(f"num_fewshot={data['num_fewshot']} is out of range; use 0 or more")
    return data["num_fewshot"]  # type: ignore[no-any-return]


def _limit(data: Mapping[str, Any]) -> float | None:
    limit = data["limit"]
    if limit is not None and (limit <= 0 or (limit >= 1 and limit != int(limit))):
        raise ConfigError(
            f"limit={limit} is out of range; use a whole number of documents (limit=50) "
            "or a fraction in (0, 1) (limit=0.1)"
        )
    return limit  # type: ignore[no-any-return]


def _samples(data: Mapping[str, Any]) -> Mapping[str, tuple[int, ...]] | None:
    samples = parse_samples(data["samples"])
    if samples is not None and data["limit"] is not None:
        raise ConfigError(
            "limit and samples both given; use one of them (samples names the documents, limit counts them)"
        )
    return samples


def _batch_size(data: Mapping[str, Any]) -> int | str:
    batch_size = data["batch_size"]
    if isinstance(batch_size, str) and batch_size.startswith("auto:") and batch_size[5:].isdigit():
        return "auto"  # lm-eval's auto:N re-tunes N times; evalflow's auto sizes each request type anyway
    if not (batch_size == "auto" or (isinstance(batch_size, int) and batch_size >= 1)):
        raise ConfigError(
            f"batch_size={batch_size!r} is not allowed; use a positive integer, batch_size=auto or auto:N"
        )
    return batch_size  # type: ignore[no-any-return]


def _gen_kwargs(data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    gen_kwargs = data["gen_kwargs"] or None
    if isinstance(gen_kwargs, str):  # lm-eval style: gen_kwargs='temperature=0,max_gen_toks=64'
        return _parse_kv(gen_kwargs)
    return gen_kwargs


_PARSERS: dict[str, Parse] = {
    "model": _model,
    "tasks": _tasks,
    "num_fewshot": _num_fewshot,
    "limit": _limit,
    "samples": _samples,
    "predict_only": lambda data: bool(data["predict_only"]),
    "seed": lambda data: int(data["seed"]),
    "batch_size": _batch_size,
    "max_batch_size": lambda data: int(data["max_batch_size"]),
    "gen_kwargs": _gen_kwargs,
    "include_path": lambda data: _paths(data["include_path"]),
    "imports": lambda data: _imports(data["imports"]),
    "data_map": lambda data: _load_data_map(data["data_map"])[0],
    "data_map_file": lambda data: _map_file(data["data_map"]),
    "apply_chat_template": lambda data: bool(data["apply_chat_template"]),
    "chat_template_name": lambda data: _template_name(data["apply_chat_template"]),
    "fewshot_as_multiturn": lambda data: _multiturn(data),  # defined below, with the other helpers
    "system_instruction": lambda data: data["system_instruction"] or None,
    "think_end_token": lambda data: data["think_end_token"] or None,
    "cache_dir": lambda data: Path(data["cache_dir"]).expanduser() if data["cache_dir"] else default_cache_dir(),
    "recompute": lambda data: _recompute(data["recompute"]),
    "bootstrap_iters": lambda data: int(data["bootstrap_iters"]),
    "log_samples": lambda data: bool(data["log_samples"]) or bool(data["predict_only"]),
    "trust_task_code": lambda data: bool(data["trust_task_code"]),
    "confirm_unsafe_code": lambda data: bool(data["confirm_unsafe_code"]),
    "code_sandbox": lambda data: str(data["code_sandbox"]),  # checked at load, after imports=[...] register theirs
    "chunk_size": lambda data: None if data["chunk_size"] is None else max(1, int(data["chunk_size"])),
    "judge_model": lambda data: _judge_model(data["judge_model"]),
    "explain": lambda data: bool(data["explain"]),
    "workers": lambda data: _workers(data["workers"]),
    "worker_resources": lambda data: _worker_resources(data["worker_resources"]),
    "ray_address": lambda data: str(data["ray_address"]) if data["ray_address"] else None,
}


def _paths(value: Any) -> tuple[str, ...]:
    """``include_path``: a list of folders, or one folder given without brackets (lm-eval's habit)."""
    if not value:
        return ()
    if isinstance(value, (str, Path)):
        return (str(value),)
    if isinstance(value, (list, tuple)):
        return tuple(str(p) for p in value)
    raise ConfigError(
        f"include_path={value!r} is neither a folder nor a list of folders; "
        "write include_path=/dir or include_path=[a,b]"
    )


def _imports(value: Any) -> tuple[str, ...]:
    """``imports``: module names or .py paths, a list or one given without brackets."""
    names = (value,) if isinstance(value, str) else tuple(value or ())
    bad = [n for n in names if not isinstance(n, str) or not n]
    if bad:
        raise ConfigError(
            f"imports={value!r}: give module names or .py files, e.g. imports=[my_metrics] or imports=lib/my_metrics.py"
        )
    return names


def _recompute(value: Any) -> str | None:
    """``recompute``: what a run computes anew rather than reads from the cache (None: nothing;
    ``recompute=false`` reaches here as the string ``'False'``, the typed field's conversion)."""
    if value is None or str(value).lower() in ("", "false", "none", "null"):
        return None
    if value in RECOMPUTE:
        return str(value)
    raise ConfigError(
        f"recompute={value!r} is not allowed; use recompute=answers (every model answer and what is "
        "scored from it, computed anew) or recompute=all (every stage), or leave it out to read the cache"
    )


def _judge_model(value: Any) -> Any:
    """``judge_model``: a preset's name or a config mapping with a type (resolved at task load)."""
    if value is None or value == "":
        return None
    if isinstance(value, str) or (isinstance(value, Mapping) and value.get("type")):
        return value
    raise ConfigError(
        f"judge_model={value!r} is not allowed; give a model preset (judge_model=smollm2) or a model "
        "config mapping with a type (judge_model='{type: hf, pretrained: PATH}')"
    )


def _workers(workers: Any) -> int:
    """``workers``, checked before any Ray is started."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ConfigError(
            f"workers={workers!r} is not allowed; use a whole number >= 1 (1: the model runs in this process)"
        )
    return workers


def _worker_resources(value: Any) -> dict[str, Any]:
    resources = value or {}
    if not isinstance(resources, Mapping) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in resources.values()
    ):
        raise ConfigError(
            f"worker_resources={resources!r} is not allowed; give a mapping of Ray resources to amounts "
            "per worker, e.g. worker_resources='{num_gpus: 1, num_cpus: 4}'"
        )
    return dict(resources)


def _template_name(value: Any) -> str | None:
    """``apply_chat_template=NAME`` (lm-eval's ``--apply_chat_template NAME``) picks a named template."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise ConfigError(
        f"apply_chat_template={value!r} is neither true/false nor a chat template name; "
        "use apply_chat_template=true, or apply_chat_template=NAME for one of the tokenizer's named templates."
    )


def _multiturn(data: Mapping[str, Any]) -> bool:
    """lm-eval's rule: few-shot examples are separate chat turns by default under a chat template."""
    value, chat = data["fewshot_as_multiturn"], bool(data["apply_chat_template"])
    if value and not chat:
        raise ConfigError("fewshot_as_multiturn=true needs apply_chat_template=true (it formats chat turns)")
    return chat if value is None else bool(value)


def _parse_kv(text: str) -> dict[str, Any]:
    """lm-eval's ``k=v,k2=v2`` form (``simple_parse_args_string``), values typed as lm-eval types them."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise ConfigError(
                f"gen_kwargs: '{part}' is not key=value; write gen_kwargs='temperature=0,max_gen_toks=64'"
            )
        key, value = part.split("=", 1)
        out[key.strip()] = parse_value(value.strip())
    return out


def parse_value(text: str) -> Any:
    """``true``/``false`` (any case) as booleans, ``none``/``null`` as None, then int, float, else
    the string: lm-eval's ``handle_arg_string``, plus None and negative integers."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def data_map_file(value: Any) -> Path | None:
    """The map file a ``data_map`` value names: a map in conf/data_maps/ by name, else a path;
    ``$EVALFLOW_DATA_MAP`` when the setting is unset. None for an in-line mapping or no map."""
    import os

    if value is None and os.environ.get("EVALFLOW_DATA_MAP"):
        value = os.environ["EVALFLOW_DATA_MAP"]
    if value is None or isinstance(value, Mapping):
        return None
    text = str(value)
    maps = conf_dir() / "data_maps"
    named = maps / f"{text}.yaml"
    if "/" not in text and os.sep not in text and named.is_file():
        return named
    path = Path(text).expanduser()
    if not path.is_file():
        names = sorted(p.stem for p in maps.glob("*.yaml"))
        raise ConfigError(
            f"data_map={value}: neither a map in conf/data_maps/ ({', '.join(names)}) nor an existing file; "
            "give a map's name (data_map=shared), the path of a YAML/JSON map file, or an in-line mapping"
        )
    return path.resolve()


def _map_file(value: Any) -> str | None:
    path = None if isinstance(value, Mapping) else data_map_file(value)
    return str(path) if path else None


def _load_data_map(value: Any) -> tuple[Mapping[str, Any] | None, Path | None]:
    """The data map as a mapping (relative paths made absolute against the map file's folder),
    and the file it came from."""
    from evalflow.taskspec.data.datamap import read_data_map

    if isinstance(value, Mapping):
        return value, None
    path = data_map_file(value)
    return (None, None) if path is None else (read_data_map(path), path)
