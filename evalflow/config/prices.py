"""The ``prices`` setting: what a million tokens cost, to turn a run's token counts into money.

A small YAML (or JSON) file of the user's, or the same mapping in-line, in dollars per million
tokens: ``input`` (prompt tokens), ``output`` (completion tokens) and, optionally, ``reasoning``
(the completion tokens a server reported as reasoning; default: the ``output`` price). Either flat,
for whatever model the run evaluates::

    input: 0.15
    output: 0.60

or keyed by model name, the name results.json's ``model_name`` gives (``pretrained=``, ``model=``,
...; :func:`evalflow.output.run_info.model_name`)::

    Qwen/Qwen3-8B: {input: 0.05, output: 0.25, reasoning: 0.25}
    gpt-4o-mini: {input: 0.15, output: 0.60}

The file is read, and every price checked, with the run's settings; the run's model is looked up
(:meth:`Prices.rate_for`) before any model call, so a bad file costs no inference. Prices change
what the run *reports*, never what it computes: the setting is in no cache key.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalflow.errors import ConfigError

PRICE_KEYS = ("input", "output", "reasoning")
EXAMPLE = "{input: 0.15, output: 0.60} (dollars per million tokens), or one such mapping per model name"


@dataclass(frozen=True)
class Rate:
    """Dollars per million tokens: prompt (``input``), completion (``output``), and the reasoning
    part of the completion (``reasoning``)."""

    input: float
    output: float
    reasoning: float


@dataclass(frozen=True)
class Prices:
    """The prices as read: one :class:`Rate` for any model (``flat``), or one per model name."""

    origin: str  # "the prices file /abs/prices.yaml" or "the in-line prices mapping": what a line names
    flat: Rate | None = None
    models: Mapping[str, Rate] = field(default_factory=dict)
    file: str | None = None  # the file's absolute path (None: in-line), as the run's records give it

    def rate_for(self, model_name: str) -> Rate:
        """The run's model's prices; a ConfigError naming the file and the missing key if it has none."""
        if self.flat is not None:
            return self.flat
        if model_name in self.models:
            return self.models[model_name]
        raise ConfigError(
            f"prices: {self.origin} has no prices for the run's model {model_name!r} (the model_name "
            f"the run's results record); it prices {', '.join(repr(m) for m in self.models)}. Add "
            f"'{model_name}': {{input: ..., output: ...}} to it, or give flat prices ({{input: ..., output: ...}}) "
            "that apply to any model. Nothing was run."
        )


def read_prices(value: Any) -> Prices | None:
    """The ``prices`` setting: a file path, a mapping, or a mapping's text; None when unset."""
    if value is None or value == "":
        return None
    if isinstance(value, Prices):
        return value
    if isinstance(value, str) and value.strip().startswith("{"):
        return _prices(_yaml(value, "the in-line prices mapping"), "the in-line prices mapping")
    if isinstance(value, Mapping):
        return _prices(dict(value), "the in-line prices mapping")
    if not isinstance(value, (str, os.PathLike)):
        raise ConfigError(
            f"prices={value!r} is neither a file nor a mapping; give the path of a YAML file of {EXAMPLE}"
        )
    path = Path(value).expanduser()
    if not path.is_file():
        raise ConfigError(
            f"prices={value}: no such file; give the path of a YAML file of {EXAMPLE}, or the mapping in-line"
        )
    origin = f"the prices file {path.resolve()}"
    return _prices(_yaml(path.read_text(encoding="utf-8"), origin), origin, str(path.resolve()))


def _yaml(text: str, origin: str) -> Any:
    import yaml  # JSON is YAML, so one parser reads both

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"prices: {origin} is not valid YAML/JSON ({exc}); it must hold {EXAMPLE}") from None


def _prices(raw: Any, origin: str, file: str | None = None) -> Prices:
    """Flat when the mapping names a price at its top level, else keyed by model name."""
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError(f"prices: {origin} holds {raw!r}, not a mapping; it must hold {EXAMPLE}")
    if any(key in raw for key in PRICE_KEYS):
        return Prices(origin, flat=_rate(raw, origin, ""), file=file)
    models = {str(name): _rate(entry, origin, f"{name}.") for name, entry in raw.items()}
    return Prices(origin, models=models, file=file)


def _rate(entry: Any, origin: str, where: str) -> Rate:
    """One model's prices, each a number of dollars per million tokens (0 or more)."""
    if not isinstance(entry, Mapping):
        raise ConfigError(
            f"prices: {origin}: {where.rstrip('.') or 'the top level'} is {entry!r}, not a mapping of prices; "
            f"write it as {{input: 0.15, output: 0.60}}"
        )
    unknown = [str(k) for k in entry if k not in PRICE_KEYS]
    missing = [k for k in ("input", "output") if k not in entry]
    if unknown or missing:
        problem = f"unknown key {where}{unknown[0]}" if unknown else f"no {where}{missing[0]} price"
        raise ConfigError(
            f"prices: {origin} has {problem}; a price entry takes input, output and optionally reasoning "
            f"(default: the output price), in dollars per million tokens, e.g. {{input: 0.15, output: 0.60}}"
        )
    numbers = {key: _number(entry[key], origin, f"{where}{key}") for key in PRICE_KEYS if key in entry}
    return Rate(numbers["input"], numbers["output"], numbers.get("reasoning", numbers["output"]))


def _number(value: Any, origin: str, key: str) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    if not ok:
        raise ConfigError(
            f"prices: {origin}: {key} is {value!r}, not a price; give dollars per million tokens as a number "
            f"of 0 or more ({key}: 0.60)"
        )
    return float(value)
