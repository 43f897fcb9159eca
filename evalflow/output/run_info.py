"""The top-level fields of lm-eval 0.4.13's results.json that describe the run rather than scores:
the model (``model_source``, ``model_name``, ``config.model_args``), version fields and the chat
options, computed as lm-eval computes them (``loggers/evaluation_tracker.py``, ``loggers/utils.py``).

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


def run_info(settings: RunSettings, model: Mapping[str, Any]) -> dict[str, Any]:
    """The model, version and chat fields lm-eval puts at the top level of results.json, for the
    ``model`` that answered (its config, or :func:`object_model` of an object)."""
    model = dict(model)
    name = model_name(model)
    template = _chat_template(settings)
    return {
        "git_hash": _git_hash(),
        "transformers_version": _version("transformers"),
        "evalflow_version": _version("evalflow"),
        "model_source": str(model.get("type")),
        "model_name": name,
        "model_name_sanitized": sanitize_model_name(name),
        "system_instruction": settings.system_instruction,
        "system_instruction_sha": hash_string(settings.system_instruction) if settings.system_instruction else None,
        "fewshot_as_multiturn": settings.fewshot_as_multiturn,
        "chat_template": template,
        "chat_template_sha": hash_string(template) if template else None,
    }


def _chat_template(settings: RunSettings) -> str | None:
    if not settings.apply_chat_template:
        return None
    from evalflow.taskspec.prompts.chat_templates import chat_template

    return chat_template(dict(settings.model), settings.chat_template_name)[0]


def _git_hash() -> str | None:
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


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
