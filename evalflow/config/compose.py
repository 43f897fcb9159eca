"""Composing ``conf/`` without the command line, for :func:`evalflow.evaluate` and tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from hydra import compose, initialize_config_dir
from omegaconf.errors import OmegaConfBaseException

from evalflow.errors import ConfigError

from evalflow.config.resolvers import register_resolvers
from evalflow.config.schema import register_configs
from evalflow.settings import RunSettings, settings_from_config

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def compose_config(overrides: list[str]) -> Any:
    register_configs()
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def compose_settings(
    task: Any, preset: str | None, overrides: list[str], values: Mapping[str, Any]
) -> RunSettings:
    base = list(overrides)
    if preset:
        base.append(f"model={preset}")
    cfg = compose_config(base)
    values = {"task": list(task) if isinstance(task, (list, tuple)) else task, **values}
    for key, value in values.items():
        try:
            cfg[key] = value
        except OmegaConfBaseException as exc:
            raise ConfigError(
                f"run setting {key}={value!r} is not accepted: {exc.msg if hasattr(exc, 'msg') else exc}. "
                "Valid settings and their types are in evalflow/config/schema.py."
            ) from None
    return settings_from_config(cfg)
