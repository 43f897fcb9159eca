"""How each run setting's value is read and checked: one function per setting kind, named by the
setting's declaration in :mod:`evalflow.config.schema` (``parse=``).

Every parser takes the setting's composed value and every setting's composed value (the few that
depend on another setting read it there), and returns the value :class:`~evalflow.config.schema.RunSettings`
holds, or raises a :class:`~evalflow.errors.ConfigError` naming the key and the fix, before anything is
loaded.

    >>> batch_size("auto:4", {})
    'auto'
    >>> parse_kv("temperature=0,until=Q:")
    {'temperature': 0, 'until': 'Q:'}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from evalflow.cache.store import default_cache_dir
from evalflow.config.data_map import setting_file, setting_map
from evalflow.config.override_words import split_word
from evalflow.config.prices import Prices, read_prices
from evalflow.config.samples_option import parse_samples
from evalflow.errors import ConfigError

Parse = Callable[[Any, Mapping[str, Any]], Any]  # (the setting's value, every setting's value) -> its parsed value

RECOMPUTE = ("answers", "all", "requests")  # the values of ``recompute``, besides None
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")  # inspect_ai's, OpenAI's API's


def boolean(value: Any, data: Mapping[str, Any]) -> bool:
    return bool(value)


def integer(value: Any, data: Mapping[str, Any]) -> int:
    return int(value)


def integer_or_none(value: Any, data: Mapping[str, Any]) -> int | None:
    """An int, or None for unset (0 stays 0: a seed of 0 is a seed)."""
    return None if value is None else int(value)


def text(value: Any, data: Mapping[str, Any]) -> str:
    return str(value)


def text_or_none(value: Any, data: Mapping[str, Any]) -> str | None:
    """An empty string is no value (``system_instruction=''`` on the command line)."""
    return str(value) if value else None


def or_none(value: Any, data: Mapping[str, Any]) -> Any:
    """The value as OmegaConf typed it, an empty one (``system_instruction=''``) read as unset."""
    return value or None


def tasks(value: Any, data: Mapping[str, Any]) -> tuple[str, ...]:
    names = tuple(str(t) for t in value) if isinstance(value, (list, tuple)) else (str(value),) if value else ()
    if not names:
        raise ConfigError("no task given; pass task=<name> (or task=[a,b]); `python -m evalflow ls` lists them")
    return names


def model(value: Any, data: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or "type" not in value:
        raise ConfigError("model must be a mapping with a `type` key; pick a preset with model=<name> (conf/model/)")
    if value["type"] == "python-object":  # evaluate(model=obj)'s snapshot (output/run_folder.write_snapshot)
        raise ConfigError(
            f"this config's model was a Python object passed to evaluate() (class {value.get('class')}, identity "
            f"{value.get('identity')}); a snapshot cannot re-create an object. Reproduce the run with a model config "
            "(model=<preset>, or model.type=pkg.module:Class and its keys) or call evaluate() with the object again; "
            "the snapshot's other settings stand."
        )
    return value


def num_fewshot(value: int | None, data: Mapping[str, Any]) -> int | None:
    if value is not None and value < 0:
        raise ConfigError(f"num_fewshot={value} is out of range; use 0 or more")
    return value


def limit(value: float | None, data: Mapping[str, Any]) -> float | None:
    if value is not None and (value <= 0 or (value >= 1 and value != int(value))):
        raise ConfigError(
            f"limit={value} is out of range; use a whole number of documents (limit=50) or a fraction in "
            "(0, 1) (limit=0.1)"
        )
    return value


def truncation_warning(value: Any, data: Mapping[str, Any]) -> float:
    """A share in [0, 1] (``truncation_warning=0.05``: 5%)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if not 0.0 <= number <= 1.0:
        raise ConfigError(f"truncation_warning={value!r} is not a share; use a fraction between 0 and 1 (0.05 is 5%)")
    return number


def prices(value: Any, data: Mapping[str, Any]) -> Prices | None:
    return read_prices(value)


def samples(value: Any, data: Mapping[str, Any]) -> Mapping[str, tuple[int, ...]] | None:
    parsed = parse_samples(value)
    if parsed is not None and data["limit"] is not None:
        raise ConfigError(
            "limit and samples both given; use one of them (samples names the documents, limit counts them)"
        )
    return parsed


def subset(value: Any, data: Mapping[str, Any]) -> Mapping[str, tuple[int, ...]] | None:
    """The documents of a partial run, per task: the same shape as ``samples``."""
    return parse_samples(value, "subset")


def stop_at_stderr(value: float | None, data: Mapping[str, Any]) -> float | None:
    if value is not None and not 0 < value < 0.5:
        raise ConfigError(
            f"stop_at_stderr={value} is out of range; give a standard error in (0, 0.5), e.g. stop_at_stderr=0.01"
        )
    if value is not None and (data.get("subset") is not None or data.get("predict_only")):
        raise ConfigError(
            "stop_at_stderr chooses the documents of each task (and needs its metric), so it takes neither "
            "subset= nor predict_only=true; drop one of them"
        )
    return value


def batch_size(value: Any, data: Mapping[str, Any]) -> int | str:
    if isinstance(value, str) and value.startswith("auto:") and value[5:].isdigit():
        return "auto"  # lm-eval's auto:N re-tunes N times; evalflow's auto sizes each request type anyway
    if value == "auto":
        return "auto"
    if isinstance(value, int) and value >= 1:
        return value
    raise ConfigError(f"batch_size={value!r} is not allowed; use a positive integer, batch_size=auto or auto:N")


def gen_kwargs(value: Mapping[str, Any] | str | None, data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if isinstance(value, str):  # lm-eval style: gen_kwargs='temperature=0,max_gen_toks=64'
        return parse_kv(value) if value else None
    return value or None


def metadata(value: Any, data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``metadata``: a mapping (Hydra's ``metadata='{max_seq_lengths:[4096,8192]}'``) or its JSON text,
    as lm-eval's ``--metadata`` takes a JSON object; unset or empty: None."""
    return _mapping(
        "metadata", value, "merged into every task's metadata, e.g. metadata='{max_seq_lengths:[4096,8192]}'"
    )


def template_args(value: Any, data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``chat_template_args``: a mapping (``chat_template_args='{enable_thinking:false}'``) or its JSON
    text, as lm-eval's ``chat_template_args`` model argument; unset or empty: None."""
    return _mapping(
        "chat_template_args",
        value,
        "of keyword arguments for the chat template, e.g. chat_template_args='{enable_thinking:false}'",
    )


def _mapping(key: str, value: Any, example: str) -> Mapping[str, Any] | None:
    """A setting that is a mapping or its JSON text (unset or empty: None); ``example`` ends the refusal."""
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{key}={value!r} is not a JSON object ({exc.msg}); use double quotes") from None
    if value is None or isinstance(value, Mapping):
        return dict(value) if value else None
    raise ConfigError(f"{key}={value!r} is not a mapping; give one {example} (or its JSON text)")


def paths(value: Any, data: Mapping[str, Any]) -> tuple[str, ...]:
    """``include_path``: a list of folders, or one folder given without brackets (lm-eval's habit)."""
    if not value:
        return ()
    if isinstance(value, (str, Path)):
        return (str(value),)
    if isinstance(value, (list, tuple)):
        return tuple(str(p) for p in value)
    raise ConfigError(
        f"include_path={value!r} is neither a folder nor a list of folders; write include_path=/dir or "
        "include_path=[a,b]"
    )


def imports(value: Any, data: Mapping[str, Any]) -> tuple[str, ...]:
    """``imports``: module names or .py paths, a list or one given without brackets."""
    names = (value,) if isinstance(value, str) else tuple(value or ())
    bad = [n for n in names if not isinstance(n, str) or not n]
    if bad:
        raise ConfigError(
            f"imports={value!r}: give module names or .py files, e.g. imports=[my_metrics] or imports=lib/my_metrics.py"
        )
    return names


def data_map(value: Any, data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return setting_map(value)


def data_map_file(value: Any, data: Mapping[str, Any]) -> str | None:
    return setting_file(value)


def template_name(value: Any, data: Mapping[str, Any]) -> str | None:
    """``apply_chat_template=NAME`` (lm-eval's ``--apply_chat_template NAME``) picks a named template."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise ConfigError(
        f"apply_chat_template={value!r} is neither true/false nor a chat template name; "
        "use apply_chat_template=true, or apply_chat_template=NAME for one of the tokenizer's named templates."
    )


def multiturn(value: Any, data: Mapping[str, Any]) -> bool:
    """lm-eval's rule: few-shot examples are separate chat turns by default under a chat template."""
    chat = bool(data["apply_chat_template"])
    if value and not chat:
        raise ConfigError("fewshot_as_multiturn=true needs apply_chat_template=true (it formats chat turns)")
    return chat if value is None else bool(value)


def cache_dir(value: Any, data: Mapping[str, Any]) -> Path:
    return Path(value).expanduser() if value else default_cache_dir()


def recompute(value: Any, data: Mapping[str, Any]) -> str | None:
    """``recompute``: what a run computes anew rather than reads from the cache (None: nothing;
    ``recompute=false`` reaches here as the string ``'False'``, the typed field's conversion)."""
    if value is None or str(value).lower() in ("", "false", "none", "null"):
        return None
    if value in RECOMPUTE:
        return str(value)
    raise ConfigError(
        f"recompute={value!r} is not allowed; use recompute=answers (every model answer and what is "
        "scored from it, computed anew), recompute=requests (the documents, few-shot contexts and requests: "
        "lm-eval's --cache_requests refresh) or recompute=all (every stage), or leave it out to read the cache"
    )


def reasoning_effort(value: Any, data: Mapping[str, Any]) -> str | None:
    """``reasoning_effort``: one of :data:`REASONING_EFFORTS` (inspect_ai's values), or unset."""
    if value is None or value == "":
        return None
    if str(value) in REASONING_EFFORTS:
        return str(value)
    raise ConfigError(
        f"reasoning_effort={value!r} is not allowed; use one of {', '.join(REASONING_EFFORTS)} (inspect_ai's and "
        "OpenAI's values; a served model or chat template takes the ones it knows), or leave it out"
    )


def thinking_budget(value: Any, data: Mapping[str, Any]) -> int | None:
    """``thinking_budget``: a number of tokens >= 1, or unset."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            f"thinking_budget={value!r} is not allowed; give the most tokens the model may think in, a whole "
            "number >= 1 (Anthropic's minimum is 1024), or leave it out"
        )
    return value


def log_samples(value: Any, data: Mapping[str, Any]) -> bool:
    """A predict-only run's samples are its output, so ``predict_only`` writes them whatever this says."""
    return bool(value) or bool(data["predict_only"])


def chunk_size(value: Any, data: Mapping[str, Any]) -> int | None:
    return None if value is None else max(1, int(value))


def judge_model(value: Any, data: Mapping[str, Any]) -> Any:
    """``judge_model``: a preset's name or a config mapping with a type (resolved at task load)."""
    if value is None or value == "":
        return None
    if isinstance(value, str) or (isinstance(value, Mapping) and value.get("type")):
        return value
    raise ConfigError(
        f"judge_model={value!r} is not allowed; give a model preset (judge_model=smollm2) or a model "
        "config mapping with a type (judge_model='{type: hf, pretrained: PATH}')"
    )


def workers(value: Any, data: Mapping[str, Any]) -> int:
    """``workers``, checked before any Ray is started."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(
            f"workers={value!r} is not allowed; use a whole number >= 1 (1: the model runs in this process)"
        )
    return value


def worker_resources(value: Any, data: Mapping[str, Any]) -> dict[str, Any]:
    resources = value or {}
    if not isinstance(resources, Mapping) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in resources.values()
    ):
        raise ConfigError(
            f"worker_resources={resources!r} is not allowed; give a mapping of Ray resources to amounts "
            "per worker, e.g. worker_resources='{num_gpus: 1, num_cpus: 4}'"
        )
    return dict(resources)


def parse_kv(text: str) -> dict[str, Any]:
    """lm-eval's ``k=v,k2=v2`` form (``simple_parse_args_string``), values typed as lm-eval types them."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, value = split_word(part)
        if value is None:
            raise ConfigError(
                f"gen_kwargs: '{part}' is not key=value; write gen_kwargs='temperature=0,max_gen_toks=64'"
            )
        out[key.strip()] = parse_value(value.strip())
    return out


def parse_value(text: str) -> Any:
    """``true``/``false`` (any case) as booleans, ``none``/``null`` as None, then int, float, else
    the string: lm-eval's ``handle_arg_string``, plus None and negative integers."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
