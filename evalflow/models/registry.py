"""Model types by name: ``model.type`` in a config picks one; ``register_model`` adds your own.

Built-in classes are named by import path and imported on first use, so choosing ``dummy`` never
imports torch, and a fully cached ``hf`` run imports only the torch-free ``hf.model`` module to compute
the model's identity.
"""

from __future__ import annotations

import importlib
import inspect
import os
from typing import Any, Callable, Mapping

from evalflow.cache.fingerprint import file_fingerprint, fingerprint
from evalflow.errors import ModelError, closest
from evalflow.models.base import default_identity

_BUILTIN = {
    "dummy": "evalflow.models.dummy:DummyModel",
    "hf": "evalflow.models.hf.model:HFModel",
}
_REGISTERED: dict[str, type] = {}


def register_model(name: str) -> Callable[[type], type]:
    """Class decorator: ``@register_model("mine")`` makes ``model.type: mine`` build that class.

    The class takes the model config's keys as keyword arguments and implements the three request
    types (:class:`evalflow.models.base.LanguageModel`). Give it an ``identity(**config)``
    classmethod when its outputs depend on more than its config values (e.g. weight files).
    """

    def decorate(cls: type) -> type:
        _REGISTERED[name] = cls
        return cls

    return decorate


def model_names() -> list[str]:
    return sorted(set(_BUILTIN) | set(_REGISTERED))


def model_class(name: str) -> type:
    """The class for ``model.type``: a registered or built-in name, or ``package.module:Class``."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if ":" in name and name not in _BUILTIN:
        module, _, attr = name.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise ModelError(f"model.type={name}: cannot import it ({exc}); check the module path and class name") from None
    if name not in _BUILTIN:
        raise ModelError(
            f"unknown model type '{name}' (config key model.type); {closest(name, model_names())} "
            "Pick a preset with model=<name> (see conf/model/) or register your class with "
            "evalflow.register_model."
        )
    module, attr = _BUILTIN[name].split(":")
    return getattr(importlib.import_module(module), attr)


def model_identity(config: Mapping[str, Any]) -> dict[str, Any]:
    """What the response cache is keyed by: computed from the config, never by loading weights.

    A user's class (``package.module:Class`` or registered) is code evalflow does not version, so
    its identity also carries a hash of the source files of the class and its bases: editing
    ``MyLM.loglikelihood`` re-runs inference instead of serving the old answers.
    """
    name = str(config["type"])
    cls = model_class(name)
    args = {k: v for k, v in config.items() if k != "type"}
    identity = getattr(cls, "identity", None)
    ident = default_identity(name, args) if identity is None else {"type": name, **identity(**args)}
    if name not in _BUILTIN:
        ident["code"] = class_source_hash(cls)
    return ident


def class_source_hash(cls: type) -> str:
    """xxhash of the source files defining ``cls`` and every base class that has one."""
    files = []
    for klass in cls.__mro__:
        try:
            path = inspect.getsourcefile(klass)
        except TypeError:  # built-in classes (object) have no source file
            continue
        if path and os.path.isfile(path) and path not in files:
            files.append(path)
    return fingerprint([file_fingerprint(path) for path in files])


def build_model(config: Mapping[str, Any]) -> Any:
    """Load the model (the expensive part: weights, torch) from its config."""
    cls = model_class(str(config["type"]))
    return cls(**{k: v for k, v in config.items() if k != "type"})
