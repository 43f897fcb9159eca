"""lm-eval's model names and ``--model_args`` → an evalflow model preset and its ``model.KEY=VALUE``
overrides: which preset each lm-eval model is, the keys lm-eval implies for it, and what a key the
preset lacks becomes (passed on, or refused by name with the preset's keys).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Literal

from evalflow.config.packaged import conf_dir
from evalflow.errors import ConfigError
from evalflow.lmeval_compat.args import RUN_MODEL_ARGS, batch_size_value, cli_model_args, hydra_value
from evalflow.lmeval_compat.served_args import (
    SERVED_PRESETS,
    SERVED_REFUSALS,
    hub_secret,
    served_arg,
    unread_kwargs_note,
)
from evalflow.lmeval_compat.thinking_args import THINKING_ARGS, THINKING_PRESETS, thinking_overrides


@dataclass(frozen=True)
class Into:
    """Model args the preset does not name go into its mapping key ``key``, as +model.KEY.ARG=VALUE
    (lm-eval's HFLM hands its **kwargs to from_pretrained: hf's from_pretrained_kwargs)."""

    key: str


# what becomes of a model arg the preset does not name: refused by name with the preset's keys;
# "pass": to the model as it is, as +model.KEY=VALUE (lm-eval's vllm hands its **kwargs to vllm.LLM);
# "ignore": accepted and ignored, named in one note (dummy: --device and --trust_remote_code too;
# lm-eval's TemplateAPI models take **kwargs and never read them, its DummyLM's create_from_arg_string
# returns cls() whatever it is given); Into(key): into that mapping key of the preset
Unknown = Literal["refuse", "pass", "ignore"] | Into


@dataclass(frozen=True)
class ModelMap:
    """An lm-eval model name's evalflow preset, and model keys lm-eval implies for it."""

    preset: str
    implied: tuple[tuple[str, Any], ...] = ()
    unknown: Unknown = "refuse"  # what becomes of model args the preset does not name
    # how evalflow's preset differs from lm-eval's model, said once per run (and in the surface table)
    differs: str = ""


_FROM_PRETRAINED = Into("from_pretrained_kwargs")
MODELS = {
    "hf": ModelMap("hf", unknown=_FROM_PRETRAINED),
    "hf-auto": ModelMap("hf", unknown=_FROM_PRETRAINED),
    "huggingface": ModelMap("hf", unknown=_FROM_PRETRAINED),
    "hf-multimodal": ModelMap("hf_multimodal", unknown=_FROM_PRETRAINED),
    "local-completions": ModelMap("openai_completions", unknown="ignore"),
    "local-chat-completions": ModelMap("openai_chat", unknown="ignore"),
    "openai-completions": ModelMap(
        "openai_completions",
        (("base_url", "https://api.openai.com/v1/completions"), ("tokenizer_backend", "tiktoken")),
        unknown="ignore",
    ),
    "openai-chat-completions": ModelMap(
        "openai_chat",
        (("base_url", "https://api.openai.com/v1/chat/completions"), ("dialect", "openai_hosted")),
        unknown="ignore",
    ),
    "azure-openai-chat-completions": ModelMap("azure_openai_chat", unknown="ignore"),
    "anthropic-chat": ModelMap("anthropic_chat", unknown="ignore"),
    "anthropic-chat-completions": ModelMap("anthropic_chat", unknown="ignore"),
    "gguf": ModelMap("gguf_server", unknown="ignore"),
    "ggml": ModelMap("gguf_server", unknown="ignore"),
    "vllm": ModelMap("vllm", unknown="pass"),
    "vllm-vlm": ModelMap("vllm_vlm", unknown="pass"),
    "dummy": ModelMap(
        "dummy",
        unknown="ignore",
        differs="evalflow's dummy model answers deterministically from a hash of each request (lm-eval's "
        "answers at random); its scores differ from lm-eval's dummy",
    ),
}

REFUSED_MODELS: dict[str, str] = {**SERVED_REFUSALS}


def preset_keys(preset: str) -> set[str]:
    """The keys of ``conf/model/<preset>.yaml``, with those of the presets its ``defaults`` names."""
    import yaml

    config = yaml.safe_load((conf_dir() / "model" / f"{preset}.yaml").read_text()) or {}
    parents = [d for d in config.pop("defaults", []) if isinstance(d, str) and d != "_self_"]
    return set(config).union(*(preset_keys(parent) for parent in parents))


def model_args(words: list[str]) -> dict[str, Any]:
    """``--model_args``: a JSON object, or ``k=v`` words (each may be a comma string) merged in order,
    as lm-eval's command line reads them (a list value such as ``k=[4096,8192]`` stays whole)."""
    return cli_model_args(words)


def run_batch_settings(lm_args: dict[str, Any], ns: argparse.Namespace, refused: list[str]) -> list[str]:
    """``batch_size``/``max_batch_size`` in ``--model_args`` as the run's settings, which the model
    reads from the run (lm-eval hands both to the model's constructor). lm-eval's own command line
    fails on a model_args batch size beside its flag's (two values for one argument): a differing
    ``--batch_size`` is refused, an equal one is the same setting."""
    out = []
    for key in RUN_MODEL_ARGS:
        if key not in lm_args:
            continue
        value = _run_batch_value(key, lm_args[key])
        flag = getattr(ns, key, None)
        if flag is not None and _run_batch_value(key, flag) != value:
            refused.append(
                f"--model_args {key}={lm_args[key]}: --{key} {flag} gives the model another {key}; give it once"
            )
        out.append(f"{key}={hydra_value(value)}")
    return out


def _run_batch_value(key: str, value: Any) -> int | str:
    """A batch size lm-eval takes among the model's arguments, checked as the run's setting is."""
    if key == "batch_size":
        return batch_size_value(value)
    if isinstance(value, int) or str(value).isdigit():
        return int(value)
    raise ConfigError(f"--model_args {key}={value!r} is not allowed; use a positive integer")


def model_overrides(
    mapped: ModelMap, lm_args: dict[str, Any], ns: argparse.Namespace, refused: list[str], secrets: dict[str, str]
) -> tuple[list[str], list[str]]:
    """``model.KEY=VALUE`` for the model args, ``--device`` and ``--trust_remote_code``; the secret
    ones go to ``secrets`` (environment variable -> value), for the run to set."""
    keys = preset_keys(mapped.preset)
    values = dict(mapped.implied)
    added: dict[str, Any] = {}  # keys the preset lacks, for a model that passes them on
    ignored: list[str] = []  # model args the preset lacks, for a model that ignores them as lm-eval's does
    ignored_flags: list[str] = []
    notes: list[str] = []
    for key, value in lm_args.items():
        if mapped.preset in SERVED_PRESETS:  # lm-eval's TemplateAPI arguments: renamed, kept secret, ignored
            kept = served_arg(mapped.preset, key, value, notes, secrets)
            if kept is not None:
                values.update(kept)
                continue
        if key in RUN_MODEL_ARGS:  # the run's settings: run_batch_settings
            continue
        if key in THINKING_ARGS and mapped.preset in THINKING_PRESETS:  # the run's: thinking_overrides
            continue
        if isinstance(mapped.unknown, Into) and hub_secret(key, value, notes, secrets):  # HFLM's hub token
            continue
        if key not in keys and mapped.unknown == "ignore":
            ignored.append(key)
            continue
        if key not in keys and mapped.unknown == "pass":
            added[key] = value
            continue
        if key not in keys and isinstance(mapped.unknown, Into):
            added[f"{mapped.unknown.key}.{key}"] = value
            continue
        if key not in keys:
            refused.append(
                f"--model_args {key}: evalflow's {mapped.preset} model (conf/model/{mapped.preset}.yaml) "
                f"has no such key; its keys are {', '.join(sorted(keys - {'type'}))}"
            )
            continue
        values[key] = value
    for flag, key, value in (
        ("device", "device", ns.device),
        ("trust_remote_code", "trust_remote_code", ns.trust_remote_code or None),
    ):
        if value is None:
            continue
        if mapped.preset in SERVED_PRESETS and key not in keys:  # lm-eval's API models ignore them
            notes.append(f"--{flag}: ignored, as lm-eval ignores it for this model (the server runs the model)")
            continue
        if key == "device" and mapped.preset in (
            "vllm",
            "vllm_vlm",
        ):  # as lm-eval's VLLM: CUDA_VISIBLE_DEVICES picks the GPUs
            notes.append(
                "--device: ignored by the vLLM backend, as lm-eval ignores it; CUDA_VISIBLE_DEVICES picks the GPUs"
            )
            continue
        if key in keys:
            values[key] = value
        elif mapped.unknown == "ignore":
            ignored_flags.append(f"--{flag}")
        else:
            refused.append(
                f"--{flag}: evalflow's {mapped.preset} model has no {key}"
                if key == "device"
                else f"--{flag}: evalflow's {mapped.preset} model runs no remote code"
            )
    if ignored or ignored_flags:
        notes.append(unread_kwargs_note(ignored, ignored_flags))
    if mapped.differs:
        notes.append(f"--model {mapped.preset}: {mapped.differs}")
    return (
        [f"model.{k}={hydra_value(v)}" for k, v in values.items()]
        + [f"+model.{k}={hydra_value(v)}" for k, v in added.items()]
        + run_batch_settings(lm_args, ns, refused)
        + (thinking_overrides(mapped.preset, lm_args, refused, notes) if mapped.preset in THINKING_PRESETS else []),
        notes,
    )
