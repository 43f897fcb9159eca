"""Runs named by what tells them apart: the settings that vary between them
(``num_fewshot=1 model.salt=x``), a path by its shortest telling tail, a multirun folder read as
its jobs. The viewer's results side by side (``evalflow report``'s tables, ``/api/results``) and
:func:`evalflow.frames.runs.runs_df`'s override columns read runs' settings here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from evalflow.config.override_words import bare_key, split_word
from evalflow.config.schema import defaults, inert_settings
from evalflow.output.run_folder import Run, is_complete, load_run
from evalflow.output.run_paths import snapshot_config, snapshot_hydra, snapshot_overrides

__all__ = [
    "expand",
    "run_labels",
    "shortest_tails",
    "varying_settings",
]

_UNSET = object()


def names_a_run(key: str) -> bool:
    """Whether a setting can tell runs' results apart: not Hydra's own (where a run was written,
    its callbacks), nor one the schema marks inert (batch_size, workers, explain, ...)."""
    return not key.startswith(("hydra.", "hydra/")) and key not in inert_settings()


def expand(folders: Sequence[Path]) -> list[Run]:
    """Runs from folders; a multirun folder (numbered job folders) gives each of its jobs."""
    runs: list[Run] = []
    for folder in map(Path, folders):
        jobs = _sweep_jobs(folder)
        if jobs:
            runs.extend(load_run(job) for job in jobs)
        else:
            runs.append(load_run(folder))
    return runs


def _sweep_jobs(folder: Path) -> list[Path]:
    if not folder.is_dir() or is_complete(folder):
        return []
    jobs = [p for p in folder.iterdir() if p.is_dir() and is_complete(p)]
    return sorted(jobs, key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0, p.name))


def run_settings(run: Run) -> dict[str, Any]:
    """What a run was asked for: its Hydra overrides when recorded, else lm-eval's config block."""
    overrides = snapshot_overrides(run.folder)
    if overrides.is_file():
        items = yaml.safe_load(overrides.read_text()) or []
        words = [split_word(str(o)) for o in items]
        return {bare_key(key): value for key, value in words if value is not None}
    config = run.results.get("config", {})
    return {k: json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v for k, v in config.items()}


def varying_settings(runs: Sequence[Run]) -> dict[str, list[Any]]:
    """Every setting that differs between evalflow runs, in the order the overrides name them,
    with its value per run. Runs of lm-eval record their settings differently, so a mix is not
    read as a sweep."""
    if len(runs) < 2 or any(r.kind != "evalflow" for r in runs):
        return {}
    settings = [run_settings(r) for r in runs]
    keys = [k for k in dict.fromkeys(k for s in settings for k in s) if names_a_run(k)]
    values = {k: [s[k] if k in s else _configured(r, k) for r, s in zip(runs, settings)] for k in keys}
    return {k: [_number(v) for v in vs] for k, vs in values.items() if len({str(v) for v in vs}) > 1}


def _configured(run: Run, key: str) -> str:
    """A setting a run was not given on its command line, as it ran: a config group's choice from
    ``.hydra/hydra.yaml`` (``model`` → ``dummy``), a value from ``.hydra/config.yaml`` (the composed
    config, the model preset's keys included), else the schema's default."""
    choices = _yaml(snapshot_hydra(run.folder)).get("hydra", {}).get("runtime", {}).get("choices", {})
    if key in choices:
        return str(choices[key])
    node: Any = _yaml(snapshot_config(run.folder))
    for part in key.split("."):
        node = node.get(part, _UNSET) if isinstance(node, dict) else _UNSET
    if node is _UNSET:
        node = defaults().get(key, "unset")
    return _as_override(node)


def _yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text()) if path.is_file() else None
    return data if isinstance(data, dict) else {}


def _as_override(value: Any) -> str:
    """A value spelled as on the command line (``true``, ``null``), as overrides.yaml spells it."""
    if isinstance(value, (bool, type(None))):
        return {True: "true", False: "false", None: "null"}[value]
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)


def _number(value: Any) -> Any:
    try:
        return float(value) if "." in str(value) else int(value)
    except (TypeError, ValueError):
        return value


def run_labels(runs: Sequence[Run], varying: Mapping[str, Sequence[Any]]) -> list[str]:
    """Each run named by all the settings that vary ("model.salt=a num_fewshot=1"), a path by the
    shortest tail that tells its runs apart (``model.pretrained=tiny-vlm``, not the whole path: the
    runs' folders and settings are listed in full above the results); runs that no setting tells
    apart by their folders."""
    if varying:
        shown = {k: shortest_tails(values) for k, values in varying.items()}
        named = [" ".join(f"{k}={values[i]}" for k, values in shown.items()) for i in range(len(runs))]
        if len(set(named)) == len(named):
            return named
    names = [r.label for r in runs]
    if len(set(names)) < len(names):
        names = [f"{r.folder.parent.name}/{r.label}" for r in runs]
    return [f"{i + 1}: {n}" if names.count(n) > 1 else n for i, n in enumerate(names)]


def shortest_tails(values: Sequence[Any]) -> list[Any]:
    """Path-like values (``/tmp/x/tiny-vlm``) cut, each, to as few last components as no other
    value ends in (``tiny-vlm``; ``a/model`` and ``b/model``); other values as they are. Tails of
    different lengths never read the same, so different values keep different names."""
    if not all(isinstance(v, str) and "/" in v for v in values):
        return list(values)
    parts = {v: v.rstrip("/").split("/") for v in values}

    def tail(value: str) -> str:
        own = parts[value]
        for n in range(1, len(own)):
            if all(other[-n:] != own[-n:] for v, other in parts.items() if v != value):
                return "/".join(own[-n:])
        return value

    return [tail(v) for v in values]
