"""``simple_evaluate(model=NAME, model_args=...)`` where lm-eval itself must build the model: a name
the user registered with lm-eval's ``@register_model`` (``lm_eval.api.registry``), or model
arguments holding an object (lm-eval's HFLM takes a loaded ``PreTrainedModel`` as ``pretrained``),
which no command line or cache key can spell.

The model is built as lm-eval's ``simple_evaluate`` builds it (``create_from_arg_string`` for a
string of arguments, ``create_from_arg_obj`` for a dict, with ``batch_size``, ``max_batch_size`` and
``device`` as the additional config) and runs as a model object. Its answers are cached under
:func:`evalflow.models.lm_objects.lm_identity`: an HFLM's identity hashes every weight of the loaded
model (its config and tokenizer too) once per run, so a model edited in memory is never served
another's answers; it costs one pass over the weights (about 0.1 s per GB on a CPU). Another class
(a user's own) has no identity and its answers are computed on every run, as the run says.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any

from evalflow.errors import ConfigError
from evalflow.lmeval_compat.model_map import MODELS

_PLAIN = (str, int, float, bool, type(None))


def needs_lm_eval(model: str, model_args: str | Mapping[str, Any] | None) -> bool:
    """Whether lm-eval's registry builds this model: its arguments hold an object, or the name is
    not one evalflow maps and the user registered it with lm-eval (already imported: a registration
    imports lm_eval.api.registry)."""
    if isinstance(model_args, Mapping) and not all(_plain(v) for v in model_args.values()):
        return True
    return model not in MODELS and _user_registered(model) is not None


def _plain(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, Mapping):
        return all(_plain(v) for v in value.values())
    return isinstance(value, _PLAIN)


def _user_registered(name: str) -> type | None:
    """The class registered under ``name`` in lm-eval's model registry by code outside lm-eval."""
    registry = sys.modules.get("lm_eval.api.registry")
    if registry is None or name not in registry.model_registry:
        return None
    target = registry.model_registry._objs[name]  # a class, or lm-eval's lazy placeholder for its own
    return target if isinstance(target, type) and not target.__module__.startswith("lm_eval.") else None


def build_lm_eval_model(model: str, model_args: str | Mapping[str, Any] | None, additional: Mapping[str, Any]) -> Any:
    """The model lm-eval's ``simple_evaluate`` would build for ``model`` and ``model_args``."""
    try:
        registry = importlib.import_module("lm_eval.api.registry")
    except ImportError:
        raise ConfigError(
            f"simple_evaluate(model={model!r}): its model_args hold an object ("
            + ", ".join(f"{k}={type(v).__name__}" for k, v in _items(model_args) if not _plain(v))
            + "), which lm-eval's own model class takes; lm-eval is not installed here (pip install "
            "lm_eval==0.4.13), so give the model by name (pretrained=a hub id or a folder) instead."
        ) from None
    cls = registry.get_model(model)
    if isinstance(model_args, Mapping):
        return cls.create_from_arg_obj(dict(model_args), dict(additional))
    return cls.create_from_arg_string(model_args or "", dict(additional))


def _items(model_args: str | Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    return list(model_args.items()) if isinstance(model_args, Mapping) else []
