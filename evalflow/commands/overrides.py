"""The run settings a subcommand takes as ``key=value`` words (``show``, ``validate``,
``decontaminate``): a run's own names and meanings, composed as a run composes them, plus ``n=``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from evalflow.config.schema import RunSettings
from evalflow.errors import ConfigError


def preview_settings(
    argv: Sequence[str], command: str, default_n: int = 3, *, n_limits: bool = True
) -> tuple[RunSettings, int]:
    """The run settings given as ``key=value`` overrides, and ``n`` (documents to show); with
    ``n_limits`` and neither ``limit`` nor ``samples`` given, ``limit`` is ``n``."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from evalflow.config.compose import compose_config
    from evalflow.config.settings import settings_from_config

    n, overrides = default_n, []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep:
            raise ConfigError(f"{command}: unexpected argument '{arg}'; arguments are key=value run settings")
        if key.lstrip("+~").startswith(("hydra.", "hydra/")):
            raise ConfigError(
                f"{command}: {key}= does nothing here: {command} starts no Hydra job and writes no run folder "
                "(it takes the run's own settings, key=value, and n=)"
            )
        if key == "n":
            if not value.isdigit() or int(value) < 1:
                raise ConfigError(f"{command}: n={value} must be a whole number of documents, 1 or more")
            n = int(value)
        else:
            overrides.append(arg)
    if not any(a.split("=", 1)[0] == "task" for a in overrides):
        raise ConfigError(f"{command}: name the task, e.g. task=arc_easy (python -m evalflow {command} --help)")
    if not any(a.startswith(("model=", "+model=")) for a in overrides):
        overrides.insert(0, "model=dummy")
    try:
        settings = settings_from_config(compose_config(overrides))
    except (HydraException, OmegaConfBaseException) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"{command}: {first}. The settings and their types are in evalflow/config/schema.py."
        ) from None
    if n_limits and settings.limit is None and settings.samples is None:
        settings = dataclasses.replace(settings, limit=float(n))  # as the run config types it
    return settings, n
