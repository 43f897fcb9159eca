"""lm-eval's ``--samples`` run option: which documents of each task to evaluate, instead of ``limit``.

    samples='{arc_easy: [0, 5, 7], gsm8k: [3]}'      # on the command line (Hydra parses it)
    samples=picked.json                              # or a JSON file holding that mapping

Indices are positions in the evaluated split; they are evaluated in dataset order, each once, as
lm-eval does (so few-shot draws match lm-eval's). A task the mapping does not name is evaluated
whole. One deviation: given unsorted indices, lm-eval 0.4.13 labels its samples' ``doc_id`` by list
position (``[5, 2]`` logs document 2 as 5); evalflow's ``doc_id`` is always the document's index.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalflow.errors import ConfigError


def parse_samples(value: Any, setting: str = "samples") -> Mapping[str, tuple[int, ...]] | None:
    """lm-eval's ``--samples`` (and evalflow's ``subset``, named by ``setting``): ``{task: [doc
    indices]}`` as a mapping, JSON text or a JSON file."""
    if value is None:
        return None
    source = setting
    if isinstance(value, str):
        text = value
        if not value.lstrip().startswith("{"):
            path = Path(value).expanduser()
            if not path.is_file():
                raise ConfigError(
                    f"{setting}={value!r} is neither a JSON mapping nor an existing JSON file; "
                    f"write {setting}='{{task: [0, 5, 7]}}' or {setting}=path/to/{setting}.json"
                )
            text, source = path.read_text(encoding="utf-8"), f"{setting} file {path}"
        try:
            value = json.loads(text)
        except ValueError:
            import yaml  # Hydra's command line writes {task: [0, 1]} without JSON quotes

            try:
                value = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise ConfigError(f"{source}: not a JSON/YAML mapping ({exc})") from None
    if not isinstance(value, Mapping) or not value:
        raise ConfigError(
            f"{source} must be a non-empty mapping of task names to lists of document indices, "
            f"e.g. {{arc_easy: [0, 5, 7]}}; got {value!r}"
        )
    out: dict[str, tuple[int, ...]] = {}
    for task, indices in value.items():
        if (
            not isinstance(indices, (list, tuple))
            or not indices
            or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in indices)
        ):
            raise ConfigError(
                f"{source}: task '{task}' must map to a non-empty list of document indices "
                f"(whole numbers from 0), got {indices!r}"
            )
        out[str(task)] = tuple(sorted(set(indices)))  # lm-eval evaluates them in dataset order, once each
    return out
