"""Composing ``conf/`` without the command line, for :func:`evalflow.evaluate` and tests.

Errors read as on the command line: an unknown preset, a misspelled setting or model key is a
:class:`~evalflow.errors.ConfigError` with the same paragraph ``python -m evalflow`` prints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import open_dict
from omegaconf.errors import OmegaConfBaseException

from evalflow.config.messages import has_preset, hydra_paragraph, unknown_model_key, unknown_setting
from evalflow.config.override_words import split_word
from evalflow.config.packaged import conf_dir
from evalflow.config.resolvers import register_resolvers
from evalflow.config.schema import RunSettings, register_configs
from evalflow.config.settings import settings_from_config
from evalflow.errors import ConfigError


def compose_config(overrides: list[str]) -> Any:
    register_configs()
    register_resolvers()
    try:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
            return compose(config_name="config", overrides=overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(hydra_paragraph(exc)) from None


def without_unused_preset(overrides: list[str]) -> list[str]:
    """``overrides`` plus ``~model`` when they name a model class by ``model.type`` alone (no
    ``model=`` preset, and a type that has none in conf/model/): the default preset's keys
    (smollm2's ``pretrained``, ``gguf_file``, ...) are for its own type, so a class of yours gets
    exactly the keys you set (``+model.KEY=VALUE``), as ``evaluate(model={"type": ...})`` does."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException:  # Hydra reports a malformed override in its own words, later
        return list(overrides)
    if any(o.key_or_group == "model" for o in parsed):
        return list(overrides)
    types = [o for o in parsed if o.key_or_group == "model.type" and not o.is_delete()]
    if not types:
        return list(overrides)
    values = [
        v.replace("\\", "")
        for o in types
        for v in (o.sweep_string_iterator() if o.is_sweep_override() else [str(o.value())])
    ]
    if any(has_preset(v) for v in values):
        return list(overrides)
    return [*overrides, "~model"]


def typed_preset(overrides: list[str]) -> str | None:
    """The ``model=`` preset the overrides name, which messages name (``smollm2``, not its type
    ``hf``); None when there is none, or ``model.type=`` replaced its type."""
    if any(o.lstrip("+~").startswith("model.type=") for o in overrides):
        return None
    words = [split_word(o) for o in overrides]
    named = [value for key, value in words if key == "model" and value is not None]
    return named[-1] if named else None


def compose_settings(
    task: Any,
    preset: str | None,
    overrides: list[str],
    values: Mapping[str, Any],
    model: Mapping[str, Any] | None = None,
    has_model_object: bool = False,
) -> RunSettings:
    """The settings of :func:`compose_run_config`'s config."""
    return settings_from_config(compose_run_config(task, preset, overrides, values, model, has_model_object))


def compose_run_config(
    task: Any,
    preset: str | None,
    overrides: list[str],
    values: Mapping[str, Any],
    model: Mapping[str, Any] | None = None,
    has_model_object: bool = False,
) -> Any:
    """The composed config (what a command-line run snapshots in ``.hydra/config.yaml``): ``conf/``
    plus ``overrides``, then ``values`` (run settings) and ``model``.

    ``model`` is a model config mapping: when its ``type`` has a preset (``conf/model/<type>.yaml``)
    it is laid over that preset and may only use the preset's keys, as ``model.KEY=VALUE`` on the
    command line; any other type (a class of your own) takes the mapping as it is. With
    ``has_model_object`` (``evaluate(model=obj)``) no preset is composed at all.
    """
    if model is not None and "type" not in model:
        raise ConfigError("a model mapping needs a `type` key (dummy, hf, or a registered model type)")
    preset_type = model is not None and has_preset(model.get("type"))
    if model is not None and preset_type:
        preset = str(model["type"])
    if preset:
        base = [*overrides, f"model={preset}"]
    elif model is None and not has_model_object:
        base = without_unused_preset(list(overrides))
    else:  # the mapping (or object) is the whole model: no preset's keys under it
        base = [*overrides, "~model"]
    cfg = compose_config(base)
    if model is not None:
        _set_model(cfg, model, preset_type)
    values = {"task": list(task) if isinstance(task, (list, tuple)) else task, **values}
    for key, value in values.items():
        if key not in cfg.keys():  # noqa: SIM118 -- a DictConfig's `in` treats a required (???) key as absent
            raise ConfigError(unknown_setting(key))
        try:
            cfg[key] = value
        except OmegaConfBaseException as exc:
            raise ConfigError(
                f"run setting {key}={value!r} is not accepted: {exc.msg if hasattr(exc, 'msg') else exc}. "
                "Valid settings and their types are in evalflow/config/schema.py."
            ) from None
    return cfg


def _set_model(cfg: Any, model: Mapping[str, Any], has_preset: bool) -> None:
    if not has_preset:
        with open_dict(cfg):
            cfg.model = dict(model)
        return
    for key, value in model.items():
        if key not in cfg.model.keys():  # noqa: SIM118 -- a DictConfig's `in` treats a required (???) key as absent
            raise ConfigError(unknown_model_key(str(key), cfg.model))
        try:
            cfg.model[key] = value
        except OmegaConfBaseException as exc:
            raise ConfigError(f"model.{key}={value!r} is not accepted: {str(exc).splitlines()[0]}") from None
