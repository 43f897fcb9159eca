"""A run's settings as one frozen, validated value (:class:`~evalflow.config.schema.RunSettings`),
built from the composed Hydra config.

Validation happens here, once, before anything is loaded, so a bad override fails in a second
with a message naming the key and the fix, not an hour later inside a stage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from evalflow.config.messages import unknown_setting
from evalflow.config.omegaconf_dicts import to_dict
from evalflow.config.schema import PARSERS, RunSettings, defaults
from evalflow.errors import ConfigError


def settings_from_config(cfg: DictConfig | Mapping[str, Any]) -> RunSettings:
    """Every field of :class:`RunSettings`, parsed from the composed config laid over the schema's
    defaults: each field by the parser its declaration names, from the setting it reads."""
    data = {**defaults(), **_plain(cfg)}
    return RunSettings(**{name: parser(data[key], data) for name, key, parser in PARSERS})


def _plain(cfg: DictConfig | Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(cfg, DictConfig):
        data: dict[str, Any] = dict(cfg)
    else:
        try:  # a DictConfig's container is a dict, its keys the settings' names
            data = to_dict(cfg, resolve=True)
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
    return data
