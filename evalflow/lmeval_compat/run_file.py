"""lm-eval 0.4.13's ``--config`` YAML run file (``EvaluatorConfig.from_cli``, ``lm_eval/config/``):
a mapping whose keys are the run flags' names and whose values are typed YAML. Its keys give the
flags the command line did not give; a flag given on the command line wins (lm-eval: CLI > YAML >
defaults). The values become the words the flag would have been given, so one translation
(:mod:`evalflow.lmeval_compat.translate`) reads both.

    model: hf
    model_args: {pretrained: org/model, dtype: float32}
    tasks: [arc_easy, boolq]
    metadata: {max_seq_lengths: [4096]}
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from evalflow.errors import ConfigError


def with_run_file(ns: argparse.Namespace, nargs: Mapping[str, str | int]) -> argparse.Namespace:
    """``ns`` with the ``--config`` file's keys filling the flags not given (``nargs``: each flag's
    argument count, as the parser declares it), and ``from_file``: those keys' YAML values; ``ns``
    itself when no file was given."""
    if ns.config is None:
        return ns
    data = _read(Path(ns.config))
    unknown = [key for key in data if key not in nargs]
    if unknown:
        raise ConfigError(
            f"--config {ns.config}: {', '.join(map(repr, unknown))} "
            f"{'is not a run setting' if len(unknown) == 1 else 'are not run settings'} of lm-eval 0.4.13; "
            f"the file's keys are the flags' names without dashes ({', '.join(sorted(nargs))})"
        )
    filled = dict(vars(ns))
    taken = {key: value for key, value in data.items() if filled.get(key) is None and key != "config"}
    filled.update({key: flag_words(key, value, nargs[key]) for key, value in taken.items()})
    # the file's own typed values, which lm-eval's results.json records as the YAML typed them (limit: 3)
    return argparse.Namespace(**filled, from_file=taken)


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"--config {path}: no such file (lm-eval's YAML run file, e.g. model: hf / tasks: [...])")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"--config {path}: invalid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: the file must hold a mapping of flag names to values")
    return data


def flag_words(flag: str, value: Any, nargs: str | int) -> Any:
    """A YAML value as the parser would hold the flag's words (None: as if not given)."""
    if value is None:
        return None
    if nargs == 0:  # a switch
        return True if value else None
    if nargs == "?":
        return _optional_word(flag, value)
    if nargs == "+":
        if isinstance(value, Mapping):
            return [json.dumps(dict(value))]
        if isinstance(value, (list, tuple)):
            return [",".join(str(v) for v in value)]
        return [str(value)]
    if isinstance(value, Mapping):  # samples
        return json.dumps(dict(value))
    if isinstance(value, (list, tuple)):  # seed: python,numpy,torch,fewshot
        return ",".join("None" if v is None else str(v) for v in value)
    return str(value)


def _optional_word(flag: str, value: Any) -> str | None:
    """``--apply_chat_template``, ``--fewshot_as_multiturn``, ``--cache_requests``: lm-eval's file
    holds a bool, a template name, or (cache_requests) the dict its flag parses into."""
    if isinstance(value, Mapping):  # {cache_requests, rewrite_requests_cache, delete_requests_cache}
        if value.get("delete_requests_cache"):
            return "delete"
        if value.get("rewrite_requests_cache"):
            return "refresh"
        return "true" if value.get("cache_requests") else None
    if value is True:
        return "true"
    if value is False:
        return "false" if flag == "fewshot_as_multiturn" else None
    return str(value)
