"""lm-eval 0.4.13's argument strings, parsed as lm-eval parses them, and written back as Hydra overrides.

lm-eval reads ``model_args`` two ways, and so does evalflow: its command line (``--model_args``,
``MergeDictAction``) splits at the commas outside brackets and quotes and types each value as
``--gen_kwargs`` values are typed, so a list stays whole; ``simple_evaluate(model_args="...")``
(``simple_parse_args_string``) splits at every comma.

>>> cli_model_args(["pretrained=org/m,max_memory_per_gpu=[4096,8192]", "dtype=float32"])
{'pretrained': 'org/m', 'max_memory_per_gpu': [4096, 8192], 'dtype': 'float32'}
>>> parse_model_args("pretrained=org/m,dtype=float32,max_length=2048,trust_remote_code=True")
{'pretrained': 'org/m', 'dtype': 'float32', 'max_length': 2048, 'trust_remote_code': True}
>>> hydra_value({"until": ["Q:", "it's"], "do_sample": False})
"{until:['Q:','it\\\\'s'],do_sample:false}"
>>> batch_size_value("auto:4"), batch_size_value("8")
('auto:4', 8)
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from typing import Any

from evalflow.config.override_words import split_word
from evalflow.errors import ConfigError


def arg_value(text: str) -> Any:
    """lm-eval's ``handle_arg_string`` (utils.py): quoted text stays a string, true/false and none
    (any case) are booleans and None, digit strings (a sign allowed) ints, then floats, else the text."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in ("'", '"'):
        return text[1:-1]
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "none":
        return None
    if text.lstrip("+-").isdigit() and text not in ("", "+", "-"):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def parse_model_args(value: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """``simple_evaluate``'s ``model_args`` as lm-eval reads it: a mapping as it is, JSON object
    text, or the comma string ``k=v,k2=v2`` (``simple_parse_args_string``: split at every comma,
    each value by :func:`arg_value`). lm-eval's command line reads it otherwise: :func:`cli_model_args`."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    text = value.strip()
    if text.startswith("{"):
        try:
            return dict(json.loads(text))
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"model_args: {text!r} is not valid JSON ({exc.msg}); use double quotes, "
                "or the comma form pretrained=NAME,dtype=float32"
            ) from None
    out: dict[str, Any] = {}
    for part in filter(None, text.split(",")):
        key, rest = split_word(part)
        if rest is None:
            raise ConfigError(
                f"model_args: '{part}' is not key=value. simple_evaluate splits a model_args string at every "
                "comma, as lm-eval does, so a list or mapping value breaks apart there: pass model_args as a "
                "dict (model_args={'max_memory_per_gpu': [4096, 8192]}), or write pretrained=NAME,dtype=float32"
            )
        out[key.strip()] = arg_value(rest)
    return out


def kv_value(text: str) -> Any:
    """lm-eval 0.4.13's command-line value typing for ``--gen_kwargs``/``--metadata``
    (``handle_cli_value_string``): true/false, digits, floats, then Python literals, else the text."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if text.isnumeric():
        return int(text)
    try:
        return float(text)
    except ValueError:
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text


def split_top_level(text: str) -> list[str]:
    """Split on the commas outside brackets and quotes (lm-eval's ``split_top_level``)."""
    parts: list[str] = []
    buf: list[str] = []
    depth = 0
    quote: str | None = None  # the open quote character, if any
    for char in text:
        if quote is not None:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[({":
            depth += 1
        elif char in "])}":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            parts.append("".join(buf))
            buf = []
            continue
        buf.append(char)
    parts.append("".join(buf))
    return [p for p in parts if p]


def merge_kv(values: list[str], flag: str) -> dict[str, Any]:
    """lm-eval's ``MergeDictAction``: a JSON object, or ``k=v,k2=v2`` words merged left to right."""
    if values and values[0].lstrip().startswith("{"):
        try:
            return dict(json.loads(values[0]))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{flag}: {values[0]!r} is not valid JSON ({exc.msg})") from None
    out: dict[str, Any] = {}
    for word in values:
        for item in split_top_level(word):
            key, value = split_word(item)
            if value is None:
                raise ConfigError(f"{flag}: expected key=value, got {item!r}")
            out[key] = kv_value(value)
    return out


def cli_model_args(words: list[str]) -> dict[str, Any]:
    """``--model_args`` as lm-eval 0.4.13's command line reads it (``MergeDictAction``): a JSON
    object in the first word, else each word's ``k=v`` items split at the top-level commas and
    typed by :func:`kv_value` (``key_val_to_dict``), merged left to right."""
    return merge_kv(words, "--model_args")


def batch_size_value(text: str | int) -> int | str:
    """``--batch_size``: a positive integer, ``auto``, or ``auto:N`` (lm-eval re-tunes N times)."""
    if isinstance(text, int) or str(text).isdigit():
        size = int(text)
        if size >= 1:
            return size
    elif text == "auto" or (text.startswith("auto:") and text[5:].isdigit() and int(text[5:]) >= 1):
        return text
    raise ConfigError(f"batch_size={text!r} is not allowed; use a positive integer, auto, or auto:N")


_PLAIN = re.compile(r"[A-Za-z_/][\w/.\-]*")
_HYDRA_WORDS = {"true", "false", "null", "none", "nan", "inf"}


def hydra_value(value: Any) -> str:
    """A Python value as Hydra's override grammar reads it back unchanged (strings quoted, so
    ``float32`` or ``1e-3`` in quotes stay what lm-eval's typing made them)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str) and _PLAIN.fullmatch(value) and value.lower() not in _HYDRA_WORDS:
        return value  # float32, org/model, /path/to/dir: read back as the same string, unquoted
    if isinstance(value, str):
        # Hydra's quoted strings: backslashes are literal except before the closing or an escaped quote
        escaped = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", value)
        return "'" + re.sub(r"(\\+)$", lambda m: m.group(1) * 2, escaped) + "'"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    raise ConfigError(f"cannot write {value!r} ({type(value).__name__}) as a setting value")


# model args lm-eval's models take that are the run's settings in evalflow (the model class reads
# them from the run, ``RUN_SETTINGS``): ``--model_args batch_size=8`` sets the run's batch size
RUN_MODEL_ARGS = ("batch_size", "max_batch_size")


def model_args_overrides(text: str) -> list[str]:
    """The native ``model_args=k=v,...`` override as ``model.k=v`` overrides, read as lm-eval's
    ``--model_args`` (:func:`cli_model_args`); ``batch_size``/``max_batch_size`` set the run's."""
    return [
        f"{'' if key in RUN_MODEL_ARGS else 'model.'}{key}={hydra_value(value)}"
        for key, value in cli_model_args([text]).items()
    ]
