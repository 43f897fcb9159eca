"""The answers' key of an hf model (``HFModel.identity``), computed from its config alone: no
torch, no transformers, no weights read beyond file fingerprints, so a fully cached run needs
nothing else. The pieces are defined beside what they key: ``identity`` (weights, tokenizer,
libraries), ``engine`` (``model.engine``), ``lmeval_args`` (lm-eval HFLM's loading arguments)."""

from __future__ import annotations

from typing import Any

from evalflow.errors import ConfigError
from evalflow.models.hf import lmeval_args
from evalflow.models.hf.device import parse_device
from evalflow.models.hf.engine import parse_engine
from evalflow.models.hf.identity import IDENTITY_VERSION, library_versions, tokenizer_identity, weights_identity


def answer_key(config: dict[str, Any]) -> dict[str, Any]:
    """What an hf model's response cache is keyed by.

    ``engine`` is in it: ``reference`` gives lm-eval's floats, ``fast`` the same answers up to
    float summation order, and one must not be served for the other (``engine``).
    Excluded, because they do not change answers (beyond float noise of batch shapes, within
    1e-5): ``batch_size``, ``max_batch_size``, the fast engine's fine switches ``prefix_sharing``
    and ``batching`` (how requests are grouped and which key/values are reused), ``draft_tokens``
    (draft tokens checked per decode step: a kept draft is the model's own greedy choice),
    ``native_attention`` (which kernel computes the same decode-step softmax), ``packed_linear``
    (which kernel computes the same linear layers), ``force_fast`` (the same engine on a device
    where it is not proven); ``device`` (``auto`` and what it resolves to alike), ``threads`` and
    the accelerate placement settings (where the same weights run). The ``engine`` named is the
    one asked for: where the model runs the reference engine instead (a device the fast engine is
    not proven on, a private API missing), its answers are the fast engine's up to float noise.
    ``trust_remote_code`` only permits loading; the code it runs is in the folder fingerprint
    (``*.py``) or fixed by the hub commit. lm-eval's loading arguments are in it where they change
    answers and out of it where they place the model (``lmeval_args.answer_identity``).
    """
    pretrained = config.get("pretrained")
    if not isinstance(pretrained, str) or not pretrained:
        raise ConfigError(
            "model.pretrained is not set: give a local model folder or a Hugging Face hub id, "
            "e.g. model=hf model.pretrained=/path/to/model (or model=smollm2)."
        )
    engine = parse_engine(config.get("engine", "fast"))
    parse_device(config.get("device", "auto"))  # not in the key, but a bad name is refused in a cached run too
    revision = config.get("revision")
    return {
        "backend": "hf-causal",
        "semantics": "lm-eval-0.4.13",
        "identity_version": IDENTITY_VERSION,
        "weights": weights_identity(pretrained, revision, config.get("gguf_file"), config.get("subfolder") or ""),
        "tokenizer": tokenizer_identity(config.get("tokenizer"), revision),
        "dtype": str(config.get("dtype", "auto")),
        "add_bos_token": config.get("add_bos_token"),
        "max_length": config.get("max_length"),
        "truncation": bool(config.get("truncation", False)),
        "max_gen_toks": int(config.get("max_gen_toks", 256)),
        "engine": engine,
        "libraries": library_versions(),
        **lmeval_args.answer_identity(config),
    }
