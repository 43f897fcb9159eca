"""One paragraph for each way composing a run config can fail, shared by the command line and
:func:`evalflow.evaluate`, with pointers for the settings lm-eval users reach for by habit.

    >>> print(unknown_setting("device"))  # doctest: +ELLIPSIS
    unknown setting 'device': the device is a model setting; write model.device=cpu ...
"""

from __future__ import annotations

from typing import Any

from evalflow.config.packaged import conf_dir
from evalflow.config.schema import SETTINGS
from evalflow.errors import closest

SCHEMA_NOTE = "The settings and their types are listed in evalflow/config/schema.py."

# lm-eval's command-line options whose evalflow spelling differs, and where they went.
LM_EVAL_HABITS = {
    "output_path": "each run writes its own folder, Hydra's run directory; write hydra.run.dir=DIR "
    "(hydra.sweep.dir=DIR for -m sweeps; default outputs/<date>/<time>)",
    "device": "the device is a model setting; write model.device=cpu (or cuda, cuda:0, mps; the default, auto, "
    "takes CUDA, else MPS, else the CPU)",
    "dtype": "the dtype is a model setting; write model.dtype=bfloat16 (or float32, auto)",
    "model_args": "model arguments are model keys; write model.KEY=VALUE (model.pretrained=..., model.dtype=...)",
    "tasks": "write task=NAME or task=[a,b]",
    "wandb_args": "log to Weights & Biases with hydra/callbacks=wandb (hydra.callbacks.wandb.project=NAME)",
    "write_out": "prompts go to samples_<task>.jsonl in the run folder",
}


def unknown_setting(key: str) -> str:
    if key in LM_EVAL_HABITS:
        return f"unknown setting '{key}': {LM_EVAL_HABITS[key]}. {SCHEMA_NOTE}"
    names = [s.name for s in SETTINGS]
    return f"unknown setting '{key}'; {closest(key, names)} {SCHEMA_NOTE}"


def unknown_model_key(key: str, model: Any) -> str:
    """``model.KEY`` that the model config does not have: a typo, nearly always, or a key of a
    class of your own not yet added with ``+``."""
    keys = [str(k) for k in model] if hasattr(model, "keys") else []
    kind = model.get("type") if hasattr(model, "get") else None
    where = (
        "the model config"
        if not kind
        else f"the '{kind}' model config (conf/model/{kind}.yaml)"
        if has_preset(kind)
        else f"the model config of model.type={kind}"
    )
    hint = closest(key, keys)
    near = f"{hint} " if hint.startswith("did you mean") else ""
    return (
        f"model.{key}: {where} has no key '{key}'; {near}its keys are: {', '.join(keys)}. "
        f"A model class of your own (model.type=pkg.module:Class) takes new keys as +model.{key}=VALUE."
    )


def has_preset(model_type: Any) -> bool:
    """Whether ``model.type`` names a preset in conf/model/ (its keys are known), or a class of your own."""
    return (conf_dir() / "model" / f"{model_type}.yaml").is_file()


def shell_quoted(override: str) -> str:
    """``key=value`` as a shell word that reaches Hydra with the value quoted: the shell strips
    ``key='</think>'``'s quotes, so the quoted value goes inside double quotes.

    >>> print(shell_quoted("think_end_token=</think>"))
    "think_end_token='</think>'"
    """
    key, sep, value = override.partition("=")
    if not sep or (value[:1] in "'\"" and value[-1:] == value[:1] and len(value) > 1):
        return f'"{override}"'
    return f"\"{key}='{value}'\"" if "'" not in value else f"'{key}=\"{value}\"'"


def hydra_paragraph(exc: Exception) -> str:
    """One paragraph for an error raised by Hydra's override parsing or config composition."""
    from hydra.errors import MissingConfigException, OverrideParseException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

    from evalflow.errors import EvalflowError

    cause: Any = exc.__cause__
    if isinstance(cause, EvalflowError):  # raised by one of our classes Hydra instantiated (a callback)
        return str(cause)
    if isinstance(exc, MissingConfigException) and exc.options and exc.missing_cfg_file:
        group, _, name = exc.missing_cfg_file.rpartition("/")
        hint = closest(name, exc.options)
        if hint.startswith("did you mean"):
            hint += f" The choices are: {', '.join(sorted(exc.options))}."
        return f"{group}={name}: there is no '{name}' in conf/{group}/; {hint}"
    if isinstance(exc, OverrideParseException):
        why = str(exc).splitlines()[0]
        return (
            f"cannot parse the override '{exc.override}' ({why}). Write overrides as key=value; quote "
            "values with brackets, commas, spaces or characters such as < > (key='[a,b]'), and keep "
            f"the quotes from the shell: {shell_quoted(exc.override)}; see "
            "https://hydra.cc/docs/advanced/override_grammar/basic/"
        )
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)) and cause.full_key:
        full_key = str(cause.full_key)
        if "." not in full_key:
            return unknown_setting(full_key)
        if full_key.count(".") == 1 and full_key.startswith("model.") and cause.parent_node is not None:
            return unknown_model_key(full_key.split(".", 1)[1], cause.parent_node)
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip()).rstrip(".")
    if isinstance(cause, OmegaConfBaseException):
        detail = str(cause).splitlines()[0]
        text += f": {detail}" + (f" (key {cause.full_key})" if getattr(cause, "full_key", None) else "")
    return f"{text}. {SCHEMA_NOTE}"
