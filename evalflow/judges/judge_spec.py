"""LLM-as-a-judge metrics: a ``metric_list`` entry whose value a judge model's answer gives.

    metric_list:
      - metric: helpful                 # any name; the ``judge:`` block makes it a judge metric
        judge:
          model: smollm2                # a preset (conf/model/) or a model config mapping
          prompt: "Q: {{ doc.question }} A: {{ response }} Gold: {{ target }} Score 1-5:"  # or prompt_file
          parser: {type: regex, pattern: "Score: (\\d+)"}   # regex | choice | number
          gen_kwargs: {max_gen_toks: 16, until: ["\\n"]}
          on_unparsed: exclude          # or a number: the score an unparseable judge answer gets
        aggregation: mean
        higher_is_better: true

Everything here is checked when the task loads (:func:`parse_judge`), before any model call: the
keys of the block, the template (it parses, and names only ``doc``, ``response``, ``target`` and
``choices``), the parser and its options (a regex that compiles), the policy. The judge's model is
resolved by :mod:`evalflow.judges.judge_models` (the run's ``judge_model`` setting overrides it).

Parsers are registered factories (:mod:`evalflow.judges.parsers`): None means the judge's text did
not parse. It is never silently 0: ``on_unparsed: exclude`` (the
default) leaves the document out of the metric's aggregate, a number scores it explicitly, and
either way the run reports how many judge answers did not parse (``<metric>_unparsed``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import meta

from evalflow.core.records import SAMPLE_FIELDS
from evalflow.errors import TaskError, closest
from evalflow.judges.parsers import JUDGE_PARSERS, Parse

TEMPLATE_NAMES = ("doc", "response", "target", "choices")
"""What a judge prompt may name: the document, the scored model's filtered answer, the gold."""

_KEYS = ("model", "prompt", "prompt_file", "parser", "gen_kwargs", "on_unparsed")
DEFAULT_GEN_KWARGS: Mapping[str, Any] = {"until": ["\n"], "max_gen_toks": 16, "do_sample": False, "temperature": 0.0}
ON_UNPARSED_DEFAULT = "exclude"
"""The policy a judge block without ``on_unparsed`` gets: leave unparsed documents out."""


def with_defaults(block: Mapping[str, Any]) -> dict[str, Any]:
    """A judge block as the judge reads it, defaults filled in: ``explain`` shows an edit of an
    omitted key as the default it replaced (``on_unparsed: "exclude" → 0``, not ``null → 0``)."""
    given = block.get("gen_kwargs")
    return {
        **block,
        "on_unparsed": block.get("on_unparsed", ON_UNPARSED_DEFAULT),
        "gen_kwargs": {**DEFAULT_GEN_KWARGS, **(given if isinstance(given, Mapping) else {})},
    }


@dataclass(frozen=True)
class JudgeSpec:
    """One judge metric, resolved from its ``judge:`` block (``prompt`` holds the template text,
    read from ``prompt_file`` when given, so cache keys hash the rubric, never a path)."""

    metric: str
    model: Any  # None: the run's judge_model setting must name one
    prompt: str
    parser: Mapping[str, Any]
    gen_kwargs: Mapping[str, Any]
    on_unparsed: float | None  # None: exclude the document from the aggregate
    parse: Parse = field(compare=False, repr=False, default=lambda text: None)

    def request_part(self) -> dict[str, Any]:
        """What judge requests are built from (the judge_requests stage's key): rubric and kwargs."""
        return {"metric": self.metric, "prompt": self.prompt, "gen_kwargs": dict(self.gen_kwargs)}


def is_judge_entry(entry: Any) -> bool:
    return isinstance(entry, Mapping) and "judge" in entry


def parse_judge(metric: str, block: Any, where: str, source: str = "") -> JudgeSpec:
    """The judge of ``metric_list`` entry ``metric``, or one TaskError naming the key and the fix."""
    if metric in SAMPLE_FIELDS:
        raise TaskError(
            f"{where}: the judge metric is named '{metric}', a field every samples row already has "
            f"({', '.join(sorted(SAMPLE_FIELDS))}), so its values would be lost; give it another name "
            "(metric: judge_correct)"
        )
    where = f"{where} (judge metric '{metric}'): judge"
    if not isinstance(block, Mapping):
        raise TaskError(
            f"{where}: the judge block must be a mapping with model, prompt (or prompt_file) and parser; got {block!r}"
        )
    unknown = [k for k in block if k not in _KEYS]
    if unknown:
        raise TaskError(
            f"{where}: unknown key '{unknown[0]}'; {closest(str(unknown[0]), _KEYS)} "
            f"The judge block takes {', '.join(_KEYS)}."
        )
    prompt = _prompt(block, where, source)
    parser = block.get("parser")
    if not isinstance(parser, Mapping) or "type" not in parser:
        raise TaskError(
            f"{where}.parser: give a mapping with a type ({', '.join(JUDGE_PARSERS.names())}), "
            'e.g. parser: {type: regex, pattern: "Score: (\\\\d+)"}'
        )
    factory = JUDGE_PARSERS.get(str(parser["type"]), where=f"{where}.parser.type")
    options = {k: v for k, v in parser.items() if k != "type"}
    parse = factory(options, f"{where}.parser")
    gen_kwargs = block.get("gen_kwargs") or {}
    if not isinstance(gen_kwargs, Mapping):
        raise TaskError(
            f'{where}.gen_kwargs: give a mapping, e.g. gen_kwargs: {{max_gen_toks: 16, until: ["\\n"]}}; '
            f"got {gen_kwargs!r}"
        )
    merged = {**DEFAULT_GEN_KWARGS, **gen_kwargs}
    if isinstance(merged["until"], str):
        merged["until"] = [merged["until"]]
    return JudgeSpec(metric, block.get("model"), prompt, dict(parser), merged, _policy(block, where), parse)


def _prompt(block: Mapping[str, Any], where: str, source: str) -> str:
    if ("prompt" in block) == ("prompt_file" in block):
        raise TaskError(
            f"{where}: give exactly one of prompt (a Jinja template) and prompt_file (a file next to the task YAML)"
        )
    if "prompt_file" in block:
        path = Path(str(block["prompt_file"]))
        if not path.is_absolute() and source:
            path = Path(source).parent / path
        if not path.is_file():
            raise TaskError(
                f"{where}.prompt_file: {path} does not exist; give a path relative to the task YAML's folder"
            )
        text = path.read_text(encoding="utf-8")
    else:
        text = block["prompt"]
    if not isinstance(text, str) or not text.strip():
        raise TaskError(f"{where}.prompt: the judge prompt must be a non-empty Jinja template; got {text!r}")
    check_template(text, where)
    return text


def check_template(text: str, where: str) -> None:
    """The judge template parses and names only :data:`TEMPLATE_NAMES` (caught now, not after the
    scored model answered every document)."""
    from evalflow.taskspec.prompts.templates import ENV

    try:
        names = meta.find_undeclared_variables(ENV.parse(text))
    except jinja2.TemplateSyntaxError as exc:
        raise TaskError(
            f"{where}.prompt: the Jinja template does not parse ({exc.message}, line {exc.lineno}); fix it"
        ) from None
    unknown = sorted(names - set(TEMPLATE_NAMES))
    if unknown:
        raise TaskError(
            f"{where}.prompt: the template names {', '.join(unknown)}; a judge prompt sees {', '.join(TEMPLATE_NAMES)} "
            f"(document fields as doc.FIELD, e.g. {{{{ doc.{unknown[0]} }}}})"
        )


def _policy(block: Mapping[str, Any], where: str) -> float | None:
    value = block.get("on_unparsed", ON_UNPARSED_DEFAULT)
    if value == ON_UNPARSED_DEFAULT:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise TaskError(
        f"{where}.on_unparsed: {value!r} is not allowed; use exclude (leave the document out of the "
        "aggregate, the default) or a number (the score an unparseable judge answer gets)"
    )


def judge_score(spec: JudgeSpec, text: str) -> tuple[float | None, bool]:
    """(the score, whether the judge's text parsed): an unparsed text scores ``on_unparsed``
    (None: no value, the document is left out of the aggregate)."""
    value = spec.parse(text)
    return (value, True) if value is not None else (spec.on_unparsed, False)
