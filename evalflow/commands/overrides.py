"""The run settings as command-line words: the run's own declaration (evalflow/config/schema.py's
``SETTINGS``: each setting's name, type, default and meaning) read as
:class:`~evalflow.commands.words.Option` rows for the run's reference page, and the settings a
preview command (``show``, ``validate``, ``decontaminate``) was given, composed as a run composes them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from evalflow.commands.words import Command, Flag, Option, SettingWords
from evalflow.config.override_words import split_word
from evalflow.config.schema import RunSettings
from evalflow.errors import ConfigError
from evalflow.output.run_paths import SNAPSHOT

_FIELD = re.compile(r"^    (\w+): [^#]*?(?:#\s*(.*))?$")


def run_setting_options() -> tuple[Option, ...]:
    """Every run setting as an option row: name, type, default and help, as
    :data:`evalflow.config.schema.SETTINGS` declares them (the one declaration of the run's settings)."""
    from evalflow.config.schema import SETTINGS

    return tuple(Option(s.name, lambda value: value, s.default, s.help, type_name=_type_name(s.type)) for s in SETTINGS)


def _type_name(kind: object) -> str:
    """``int | None`` for the OmegaConf type ``typing.Optional[int]``; a plain class by its name."""
    return kind.__name__ if isinstance(kind, type) else str(kind).replace("typing.", "")


def documents(value: str) -> int:
    """a whole number of documents, 1 or more"""
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"n={value} must be a whole number of documents, 1 or more")
    return int(value)


def preview_command(name: str, summary: str, doc: str | None, default_n: int | None = 3) -> Command:
    """A command that takes a run's settings and, with ``default_n``, ``n=`` documents to show."""
    n = Option("n", documents, default_n, "how many documents of each task to render")
    return Command(
        name,
        summary,
        max_positional=0,
        options=(n,) if default_n is not None else (),
        settings=SettingWords(help="any run setting (docs/reference/run.md), as a run takes it; task= is required"),
        doc=doc or "",
    )


def preview_settings(passed: Sequence[str], command: str, n: int = 3, *, n_limits: bool = True) -> RunSettings:
    """The run settings given as ``key=value`` words (``passed``, as :func:`parse_words` passed them
    on); with ``n_limits`` and neither ``limit`` nor ``samples`` given, ``limit`` is ``n``."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from evalflow.config.compose import compose_config
    from evalflow.config.settings import settings_from_config

    overrides = list(passed)
    keys = [split_word(word)[0] for word in overrides]
    if "task" not in keys:
        raise ConfigError(f"{command}: name the task, e.g. task=arc_easy (python -m evalflow {command} --help)")
    if "model" not in keys and "+model" not in keys:
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
    return settings


RUN_DOC = f"""
Every word is a run setting (``key=value``, typed and checked against evalflow/config/schema.py
before anything is loaded), a model key (``model.KEY=VALUE``), a preset (``model=NAME``,
``data_map=NAME``, ``hydra/launcher=NAME``) or one of Hydra's own words (``hydra.run.dir=DIR``,
``-m`` to sweep over comma-separated values, ``--cfg job`` to print the composed config,
``--config-dir RUN/{SNAPSHOT} --config-name config`` to reproduce a run). Hydra reads these words; the
settings below are the run's one declaration, and ``python -m evalflow --help`` lists them with the
presets::

    python -m evalflow model=dummy task=gsm8k num_fewshot=5 limit=50
    python -m evalflow model=dummy task=[arc_easy,arc_challenge] -m num_fewshot=0,5
"""


def run_command() -> Command:
    """The run itself, ``python -m evalflow key=value ...``: its reference page's declaration."""
    return Command(
        "",
        "run an evaluation: the settings below, as key=value words",
        options=run_setting_options(),
        flags=(Flag("-m", "sweep: one job, and one run folder, per combination of comma-separated values"),),
        doc=RUN_DOC,
    )
