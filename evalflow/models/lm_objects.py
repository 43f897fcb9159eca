"""The cache identity of an lm-eval model object handed to ``simple_evaluate(model=lm)`` (or
``evaluate``): lm-eval's models have no ``identity()``, so without one their answers could never be
cached (two different objects would otherwise share one key).

lm-eval's ``HFLM`` gets one built from the loaded object itself, not from how it was built: it may
have been built from a hub id, a folder, a GGUF file, a ``PreTrainedModel`` already in memory, with
PEFT or delta weights, and a tokenizer given apart. So the identity hashes what answers depend on:

- ``weights``: every parameter and buffer of the loaded model (name, dtype, shape, bytes): the
  weights, their dtype and any adapter, whatever files they came from;
- ``config``: the model's configuration (architecture, rope scaling, attention settings), its
  ``_name_or_path`` left out;
- ``tokenizer``: its full serialized state (vocabulary, merges, normalizer, added tokens, the
  post-processor that adds BOS), special tokens and padding and truncation sides;
- HFLM's own settings that change answers: ``add_bos_token``, ``max_length`` (as resolved),
  ``truncation``, ``prefix_token_id``, ``think_end_token``, ``softmax_dtype``,
  ``mixed_precision_dtype``, its backend (causal or seq2seq);
- ``code``: the source of the lm-eval modules HFLM runs (``lm_eval.models.huggingface`` and what it
  imports of lm-eval) and lm-eval's version; torch, transformers and tokenizers versions.

Left out, as evalflow's own ``hf`` model leaves them out (:meth:`evalflow.models.hf.hf_model.HFModel.identity`):
the batch size and device (where and how many at once, not what), and paths. ``name`` (the model's
``_name_or_path``, lm-eval's name for a model object) is in it so results name the model.

It is not the identity of ``model=hf model.pretrained=X``, on purpose: lm-eval's code computes
HFLM's answers, evalflow's computes those of ``hf`` (equal to float noise, but evalflow keeps even
its own two engines' answers apart), so neither is served the other's.

Other lm-eval models (a subclass of HFLM included: it may hold state this cannot see) get no
identity; :func:`lm_identity` says why, and their answers are computed on every run.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from typing import Any

from evalflow.cache.fingerprint import fingerprint

HFLM = ("lm_eval.models.huggingface", "HFLM")  # module and name of the one class given an identity

# HFLM's attributes that change answers, besides max_length and prefix_token_id (properties)
_SETTINGS = ("add_bos_token", "truncation", "think_end_token", "softmax_dtype", "mixed_precision_dtype", "backend")


def lm_identity(model: Any) -> tuple[Any, str]:
    """``(identity, "")`` for an lm-eval HFLM; ``(None, why)`` for another lm-eval model (an
    object of a class from the ``lm_eval`` package or a subclass of one); ``(None, "")`` for an
    object that is no lm-eval model."""
    cls = type(model)
    if (cls.__module__, cls.__qualname__) == HFLM:
        return hflm_identity(model)
    lm_eval_bases = [k for k in cls.__mro__ if k.__module__.split(".")[0] == "lm_eval"]
    if not lm_eval_bases:
        return None, ""
    return None, (
        f"is an lm-eval model ({lm_eval_bases[0].__module__}.{lm_eval_bases[0].__qualname__}); evalflow "
        "builds an identity for lm-eval's HFLM itself only, as another class may hold state it cannot see"
    )


def hflm_identity(lm: Any) -> tuple[Any, str]:
    """HFLM's identity (see the module's docstring), or ``(None, why)`` when its weights cannot be
    read (offloaded to disk: on the meta device)."""
    try:
        weights = weights_fingerprint(lm.model)
    except _Unreadable as exc:
        return None, str(exc)
    config = json.loads(lm.model.config.to_json_string(use_diff=False))
    config.pop("_name_or_path", None)
    return {
        "name": str(getattr(lm.model.config, "_name_or_path", "") or type(lm).__name__),
        "backend": "lm-eval-HFLM",
        "weights": weights,
        "config": fingerprint(config),
        "tokenizer": tokenizer_fingerprint(lm.tokenizer),
        "settings": {
            "max_length": int(lm.max_length),
            "prefix_token_id": lm.prefix_token_id,
            **{name: _plain(getattr(lm, name, None)) for name in _SETTINGS},
        },
        "code": {"lm_eval": _version("lm_eval"), "source": _source(type(lm).__module__)},
        "libraries": {name: _version(name) for name in ("torch", "transformers", "tokenizers")},
    }, ""


class _Unreadable(Exception):
    """The model's weights cannot be hashed; the message says why (a clause after the class name)."""


def weights_fingerprint(module: Any) -> str:
    """xxhash of every parameter and buffer of a torch module: names, dtypes, shapes and bytes
    (tied weights once). The bytes are copied to the CPU one tensor at a time."""
    import itertools

    import torch
    import xxhash

    digest = xxhash.xxh3_128()
    for name, tensor in itertools.chain(module.named_parameters(), module.named_buffers()):
        if tensor.device.type == "meta":
            raise _Unreadable(
                f"has weights that are not in memory ({name} is on the meta device: offloaded), "
                "which evalflow cannot hash into an identity"
            )
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)};".encode())
        try:
            raw = tensor.detach().reshape(-1).contiguous().view(torch.uint8)
        except RuntimeError as exc:  # a quantized tensor type without a byte view
            raise _Unreadable(f"has a weight ({name}, {tensor.dtype}) evalflow cannot read as bytes ({exc})") from None
        digest.update(raw.cpu().numpy())  # the buffer itself: no copy of a CPU tensor
    return digest.hexdigest()


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """xxhash of what a Hugging Face tokenizer encodes and decodes by: its full serialized state
    (a fast tokenizer's ``to_str()``, else its vocabulary), its special tokens, its sides."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    state = backend.to_str() if backend is not None else sorted(tokenizer.get_vocab().items())
    return fingerprint(
        {
            "class": type(tokenizer).__name__,
            "state": state,
            "special": {k: str(v) for k, v in tokenizer.special_tokens_map.items()},
            "sides": [getattr(tokenizer, "padding_side", None), getattr(tokenizer, "truncation_side", None)],
            "add_tokens": [getattr(tokenizer, "add_bos_token", None), getattr(tokenizer, "add_eos_token", None)],
        }
    )


def _plain(value: Any) -> Any:
    """A setting as plain data (a torch dtype as its name)."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def _source(module: str) -> str:
    """Hash of the lm-eval modules ``module`` runs: it and every lm-eval module it imports."""
    import importlib

    from evalflow.cache.code import module_closure

    package = Path(importlib.import_module(module.split(".")[0]).__file__ or "").parent
    return fingerprint(dict(module_closure(module, package)))


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
