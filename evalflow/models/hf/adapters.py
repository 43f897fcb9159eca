"""What lm-eval 0.4.13's ``HFLM._create_model`` does besides ``from_pretrained``: GPTQ loaders
(``autogptq``, ``gptqmodel``), a PEFT adapter over the base model (``peft``) and delta weights
added to it (``delta``), each as lm-eval does it, so the answers are lm-eval's.

Imported only when a model loads (torch and peft at call time); ``lmeval_args`` holds the checks
and the key. The libraries that are not evalflow's dependencies (peft: the ``peft`` extra;
auto-gptq and gptqmodel, GPU builds) are refused with one paragraph naming the install when missing.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from evalflow.errors import ModelError

log = logging.getLogger(__name__)


def _library(module: str, setting: str, install: str) -> Any:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        raise ModelError(
            f"model.{setting} needs the '{module}' library, which is not installed: {install}, "
            f"or unset model.{setting}."
        ) from None


def gptq_model(
    pretrained: str, autogptq: bool | str, gptqmodel: bool, trust_remote_code: bool, kwargs: Mapping[str, Any]
) -> Any:
    """The model through AutoGPTQ's or GPTQModel's ``from_quantized``, with lm-eval's arguments:
    ``autogptq=true`` the checkpoint's own file name, a string the weights file (``.safetensors`` or not)."""
    if autogptq:
        auto_gptq = _library("auto_gptq", "autogptq", "pip install auto-gptq (a CUDA build)")
        return auto_gptq.AutoGPTQForCausalLM.from_quantized(
            pretrained,
            trust_remote_code=trust_remote_code,
            model_basename=None if autogptq is True else Path(str(autogptq)).stem,
            use_safetensors=True if autogptq is True else str(autogptq).endswith(".safetensors"),
            **kwargs,
        )
    library = _library("gptqmodel", "gptqmodel", "pip install gptqmodel --no-build-isolation")
    return library.GPTQModel.from_quantized(pretrained, trust_remote_code=trust_remote_code, **kwargs)


def with_peft(model: Any, tokenizer: Any, peft: str, revision: str) -> Any:
    """``PeftModel.from_pretrained`` over ``model``, after resizing its embeddings to the
    tokenizer's length where they differ (an adapter trained with added tokens), as lm-eval."""
    library = _library("peft", "peft", "pip install 'evalflow[peft]' (or pip install peft)")
    config = getattr(model.config, "text_config", None) or model.config
    if getattr(config, "vocab_size", len(tokenizer)) != len(tokenizer):
        log.info("hf model: resizing the embeddings to the tokenizer's %d tokens for the adapter", len(tokenizer))
        model.resize_token_embeddings(len(tokenizer))
    return library.PeftModel.from_pretrained(model, peft, revision=revision)


def add_delta(model: Any, delta: str, load_delta: Callable[[str], Any]) -> Any:
    """The base weights plus the delta model's, parameter by parameter (lm-eval's ``delta``): every
    tensor of the base's ``state_dict`` must have its delta."""
    delta_weights = load_delta(delta).state_dict()
    for name, param in model.state_dict().items():
        if name not in delta_weights:
            raise ModelError(
                f"model.delta '{delta}' has no weights for layer {name} of the base model; a delta holds "
                "one tensor per base tensor (the fine-tuned minus the base weights)."
            )
        param.data += delta_weights[name]
    return model
