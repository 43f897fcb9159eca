"""Model types by name: ``model.type`` in a config picks one; ``register_model`` adds your own.

One registry (:class:`evalflow.registry.Registry`) holds every name. Built-in classes are registered
by import path and imported on first use, so choosing ``dummy`` never imports torch, and a fully
cached ``hf`` run imports only the torch-free ``hf.hf_model`` module to compute the model's identity. A
name is taken once: registering another class under ``hf`` (or under your own name twice) is
refused, since it would silently change which model every cached answer belongs to.

    @register_model("mine")
    class Mine(LanguageModel): ...
    model_class("mine")                      # Mine
    model_class("my_pkg.engine:Engine")      # a class by import path, never registered
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalflow.cache.fingerprint import file_fingerprint, fingerprint
from evalflow.core.records import REQUEST_TYPES
from evalflow.errors import ConfigError, ModelError, closest
from evalflow.models.protocol import LanguageModel, default_identity, feature
from evalflow.registry import Registry, qualified


def _check_registered(name: str, cls: Any) -> None:
    if ":" in name:
        raise ModelError(
            f"a model type must be registered under a name without ':' (that form is an import path, "
            f"model.type=pkg.module:Class); got {name!r}"
        )
    check_model_class(cls, f"register_model({name!r})")


MODELS: Registry[type] = Registry(
    "model type",
    error=ModelError,
    setting="config key model.type",
    noun="model",
    check=_check_registered,
    consequence="change which model a config names and whose cached answers it reuses",
    hint="Pick a preset with model=<name> (see conf/model/), give a class as model.type=pkg.module:Class, "
    "or register yours with evalflow.register_model(...) in a module the run imports (imports=[my_module]).",
    builtin={
        "dummy": "evalflow.models.dummy:DummyModel",
        "hf": "evalflow.models.hf.hf_model:HFModel",
        "hf_multimodal": "evalflow.models.hf.vlm.vlm:HFMultimodalModel",
        "openai_completions": "evalflow.models.api.completions:OpenAICompletions",
        "openai_chat": "evalflow.models.api.chat_model:OpenAIChat",
        "gguf_server": "evalflow.models.api.gguf_server:GgufServer",
        "vllm": "evalflow.models.vllm.vllm_model:VLLMModel",
        "vllm_vlm": "evalflow.models.vllm.vllm_vlm:VLLMVisionModel",
    },
)
register_model = MODELS.register
"""Class decorator: ``@register_model("mine")`` makes ``model.type: mine`` build that class.

The class takes its model config's keys as keyword arguments (plus the run settings it lists in
``RUN_SETTINGS``) and implements the three request types (:class:`evalflow.models.protocol.LanguageModel`;
subclassing it is optional)."""


def model_names() -> list[str]:
    return list(MODELS.names())


def model_class(name: str) -> type:
    """The class for ``model.type``: a registered or built-in name, or ``package.module:Class``."""
    if ":" not in name or name in MODELS:
        return MODELS.get(name)
    module, _, attr = name.partition(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ModelError(f"model.type={name}: cannot import it ({exc}); check the module path and class name") from None
    check_model_class(cls, f"model.type={name}")
    return cls


def check_model_class(cls: Any, where: str) -> None:
    """Refuse what is not a model class before a config is built around it."""
    missing = [m for m in REQUEST_TYPES if not callable(getattr(cls, m, None))]
    if not isinstance(cls, type) or missing:
        raise ModelError(
            f"{where}: {cls!r} is not a model class; a model class implements the three request types "
            f"{', '.join(REQUEST_TYPES)}{f' (missing: {missing})' if isinstance(cls, type) else ''} "
            "(see evalflow.models.protocol.LanguageModel)."
        )
    for name in ("identity", "chat_template_source"):  # called on the class, before any model is built
        declared = inspect.getattr_static(cls, name, None)
        if inspect.isfunction(declared):
            raise ModelError(
                f"{where}: {cls.__qualname__}.{name} is a plain method, but evalflow calls it on the class, before the "
                f"model is built (a fully cached run never builds it): make it a @classmethod, "
                f"`def {name}(cls, **config)`."
            )


def model_identity(config: Mapping[str, Any], run_values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What the response cache is keyed by: computed from the config, never by loading weights.

    It carries ``code``, a hash of the source that computes the answers (:func:`model_code_hash`),
    for built-in and user classes alike: editing ``MyLM.loglikelihood`` or
    ``evalflow/models/hf/score.py`` re-runs inference instead of serving the old answers.
    A class's own ``identity`` also gets the run settings it declares (``RUN_SETTINGS``), as its
    constructor does, and keys those that change answers (vllm's ``think_end_token``, not ``batch_size``).
    """
    name = str(config["type"])
    cls = model_class(name)
    args = {k: v for k, v in config.items() if k != "type"}
    run = {k: run_values[k] for k in feature(cls, "RUN_SETTINGS") if k in run_values} if run_values else {}
    declared = feature(cls, "identity")(**args, **run)
    ident = default_identity(name, args) if declared is None else {"type": name, **declared}
    ident["code"] = model_code_hash(cls)
    return ident


def model_code_hash(cls: type) -> str:
    """xxhash of the code files of ``cls``: those defining it and its bases, and the ``CODE``
    modules it declares. The file list is found once per class; contents are hashed by
    ``file_fingerprint``, memoized by size and mtime, so an edited file is hashed anew."""
    return fingerprint([(Path(path).name, file_fingerprint(path)) for path in code_files(cls)])


@functools.cache
def code_files(cls: type) -> tuple[str, ...]:
    """The source files of ``cls``'s code (found once per class: ``inspect`` reads are not free)."""
    files: list[str] = []
    for klass in cls.__mro__:
        if klass in LanguageModel.__mro__[1:]:  # abc.ABC and object: Python's, not the model's
            continue
        try:
            path = inspect.getsourcefile(klass)
        except TypeError:  # built-in classes (object) have no source file
            continue
        if path and os.path.isfile(path):
            files.append(path)
    for module in feature(cls, "CODE"):
        files.extend(_module_files(module, cls))
    return tuple(sorted(set(files)))


def _module_files(module: str, cls: type) -> list[str]:
    """The ``.py`` files of a module, or of every module of a package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModelError(f"{qualified(cls)}.CODE names '{module}', which is not an importable module")
    if spec.submodule_search_locations:
        return [str(p) for folder in spec.submodule_search_locations for p in sorted(Path(folder).rglob("*.py"))]
    return [spec.origin]


def build_model(load_args: Mapping[str, Any]) -> Any:
    """Load the model (the expensive part: weights, torch): ``type`` plus its constructor's keyword
    arguments, as :func:`model_arguments` gives them (a plain model config is such a mapping)."""
    cls = model_class(str(load_args["type"]))
    return cls(**{k: v for k, v in load_args.items() if k != "type"})


class LoadedModels:
    """Models built once and lent to every later run in this process that loads them with the same
    arguments. The sequential gate's rounds are each a whole run; building the model anew each
    round cost more than the rounds' inference (9 mmlu rounds of SmolLM2: 411 s against the whole
    run's 570 s). A model's answers depend on its load arguments only (its cache identity says
    so), so one built model answers for all of them."""

    def __init__(self) -> None:
        self._models: dict[str, Any] = {}

    def build(self, load_args: Mapping[str, Any]) -> Any:
        """:func:`build_model`'s model, built on the first call with these arguments."""
        key = fingerprint(dict(load_args))
        if key not in self._models:
            self._models[key] = build_model(load_args)
        return self._models[key]


def model_arguments(cls: type, config: Mapping[str, Any], run_values: Mapping[str, Any]) -> dict[str, Any]:
    """The constructor's keyword arguments: the config's keys and the run settings the class
    declares (``RUN_SETTINGS``), checked against its signature so that a key it does not take is
    one paragraph naming the class and the key, not a TypeError from inside a run."""
    name = str(config["type"])
    wanted = feature(cls, "RUN_SETTINGS")
    unknown = [k for k in wanted if k not in run_values]
    if unknown:
        raise ModelError(
            f"{qualified(cls)}.RUN_SETTINGS names {unknown}, which are not run settings; "
            f"pick from: {', '.join(sorted(run_values))}"
        )
    kwargs = {**{k: v for k, v in config.items() if k != "type"}, **{k: run_values[k] for k in wanted}}
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):  # a signature Python cannot read (some C types): let the call decide
        return kwargs
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        takes = [p for p, v in params.items() if v.kind in (v.POSITIONAL_OR_KEYWORD, v.KEYWORD_ONLY)]
        for key in kwargs:
            if key not in takes:
                hint = closest(key, takes)
                near = f" ({hint})" if hint.startswith("did you mean") else ""
                raise ConfigError(
                    f"model.{key}: the model class {qualified(cls)} (model.type={name}) takes no key '{key}'{near}; "
                    f"its constructor takes {', '.join(takes) or 'no keys'}. Stop setting the key (a model= preset "
                    f"sets its own keys: give model.type={name} without one to pass only the keys you set) or add a "
                    f"'{key}' parameter to {cls.__name__}.__init__."
                )
    try:
        inspect.signature(cls).bind(**kwargs)
    except TypeError as exc:
        raise ConfigError(
            f"model.type={name}: the model class {qualified(cls)} cannot be built from the keys "
            f"{sorted(kwargs)}: {exc}. Set the missing key with +model.KEY=VALUE."
        ) from None
    return kwargs
