"""The values of lm-eval 0.4.13's results fields that describe the run rather than scores: the
model's name, the versions, the chat template, computed as lm-eval computes them
(``loggers/evaluation_tracker.py``, ``loggers/utils.py``). Which field holds which is
:mod:`evalflow.output.results`' to say.

    >>> model_name({"type": "hf", "pretrained": "org/model", "dtype": "float32"})
    'org/model'
    >>> sanitize_model_name("org/model")
    'org__model'
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections.abc import Mapping
from importlib import metadata
from typing import Any

from evalflow.config.packaged import source_checkout
from evalflow.config.schema import RunSettings

# lm-eval's order: peft and delta adapters name the model before the base model they are on.
_NAME_KEYS = ("peft", "delta", "pretrained", "model", "path", "engine")


def model_name(model: Mapping[str, Any]) -> str:
    """lm-eval's ``_get_model_name``: the first of the name-bearing model args; else the model type
    (lm-eval would make up a random id, which no two runs share)."""
    for key in _NAME_KEYS:
        if model.get(key):
            return str(model[key])
    return str(model.get("type"))


def object_model(model: Any, identity: Any) -> dict[str, Any]:
    """How the run's records name a model object passed to ``evaluate(model=obj)``: ``type`` is the
    ``name`` in its ``identity()``, else its class; the identity's other keys are its arguments.

        >>> object_model(object(), {"name": "my-model", "version": 2})
        {'type': 'my-model', 'version': 2}
    """
    args = dict(identity) if isinstance(identity, Mapping) else {}
    name = args.pop("name", None) or type(model).__name__
    return {"type": str(name), **args}


def sanitize_model_name(name: str) -> str:
    return re.sub(r"[\"<>:/|\\?*\[\]]+", "__", name)


def hash_string(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chat_template(settings: RunSettings) -> str | None:
    """The chat template the run applied (None without ``apply_chat_template``)."""
    if not settings.apply_chat_template:
        return None
    from evalflow.taskspec.prompts.chat_templates import chat_template as template_of

    return template_of(dict(settings.model), settings.chat_template_name)[0]


def git_hash() -> str | None:
    """The commit of the source checkout evalflow runs from (lm-eval records its own), None for an
    installed wheel, even one installed in a folder inside some git repository."""
    checkout = source_checkout()
    if checkout is None:
        return None
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def version(name: str) -> str | None:
    """The installed version of the distribution ``name`` (None when it is not installed)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
