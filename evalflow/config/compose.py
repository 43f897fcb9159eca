"""Composing ``conf/`` without the command line, for :func:`evalflow.evaluate` and tests.

Errors read as on the command line: an unknown preset, a misspelled setting or model key is a
:class:`~evalflow.errors.ConfigError` with the same paragraph ``python -m evalflow`` prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import open_dict
from omegaconf.errors import OmegaConfBaseException

from evalflow.config.messages import hydra_paragraph, unknown_model_key, unknown_setting
from evalflow.config.resolvers import register_resolvers
from evalflow.config.schema import register_configs
from evalflow.errors import ConfigError
from evalflow.settings import RunSettings, settings_from_config

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def compose_config(overrides: list[str]) -> Any:
    register_configs()
    register_resolvers()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose(config_name="config", overrides=overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(hydra_paragraph(exc)) from None


def compose_settings(
    task: Any, preset: str | None, overrides: list[str], values: Mapping[str, Any],
    model: Mapping[str, Any] | None = None,
) -> RunSettings:
    """Settings from ``conf/`` plus ``overrides``, then ``values`` (run settings) and ``model``.

    ``model`` is a model config mapping: when its ``type`` has a preset (``conf/model/<type>.yaml``)
    it is laid over that preset and may only use the preset's keys, as ``model.KEY=VALUE`` on the
    command line; any other type (a class of your own) takes the mapping as it is.
    """
    base = list(overrides)
    has_preset = model is not None and (CONF_DIR / "model" / f"{model.get('type')}.yaml").is_file()
    if model is not None and "type" not in model:
        raise ConfigError("a model mapping needs a `type` key (dummy, hf, or a registered model type)")
    if has_preset:
        preset = str(model["type"])  # type: ignore[index]
    if preset:
        base.append(f"model={preset}")
    cfg = compose_config(base)
    if model is not None:
        _set_model(cfg, model, has_preset)
    values = {"task": list(task) if isinstance(task, (list, tuple)) else task, **values}
    for key, value in values.items():
        if key not in cfg.keys():
            raise ConfigError(unknown_setting(key))
        try:
            cfg[key] = value
        except OmegaConfBaseException as exc:
            raise ConfigError(
                f"run setting {key}={value!r} is not accepted: {exc.msg if hasattr(exc, 'msg') else exc}. "
                "Valid settings and their types are in evalflow/config/schema.py."
            ) from None
    return settings_from_config(cfg)


def _set_model(cfg: Any, model: Mapping[str, Any], has_preset: bool) -> None:
    if not has_preset:
        with open_dict(cfg):
            cfg.model = dict(model)
        return
    for key, value in model.items():
        if key not in cfg.model.keys():  # `in` alone treats a required (???) key as absent
            raise ConfigError(unknown_model_key(str(key), cfg.model))
        try:
            cfg.model[key] = value
        except OmegaConfBaseException as exc:
            raise ConfigError(f"model.{key}={value!r} is not accepted: {str(exc).splitlines()[0]}") from None
