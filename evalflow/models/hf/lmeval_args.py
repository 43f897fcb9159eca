"""lm-eval 0.4.13 ``HFLM``'s loading arguments beyond the weights' path: what each means, which
are refused, and which of them key the answers.

Kept apart from ``load`` (which calls transformers) because a cached run needs only the checks
and the key, never torch: :func:`checked` refuses a bad combination before any model call, in a
run served from the cache too, and :func:`answer_identity` is the part of ``HFModel.identity``
these arguments add. In the key: what changes an answer (the adapter's or delta's files, the
quantizer, the attention implementation, the softmax and autocast dtypes, the prefix token, the
subfolder's files, the slow or fast tokenizer, ``from_pretrained``'s other arguments). Out of it:
what only places the model or says where files come from (:data:`PLACEMENT_KWARGS`, ``tp_plan``).

>>> bnb_config_kwargs({"load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "low_cpu_mem_usage": True})
({'load_in_4bit': True, 'bnb_4bit_quant_type': 'nf4'}, {'low_cpu_mem_usage': True})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evalflow.errors import ConfigError, closest
from evalflow.models.hf.engine import REFERENCE, Paths
from evalflow.models.hf.identity import adapter_identity

# the model config keys :func:`checked` reads
CONFIG_KEYS = frozenset(
    {
        "backend",
        "subfolder",
        "use_fast_tokenizer",
        "softmax_dtype",
        "mixed_precision_dtype",
        "prefix_token_id",
        "tp_plan",
        "parallelize",
        "attn_implementation",
        "load_in_4bit",
        "load_in_8bit",
        "autogptq",
        "gptqmodel",
        "peft",
        "delta",
        "from_pretrained_kwargs",
    }
)
BACKENDS = ("default", "causal", "seq2seq")
SEQ2SEQ_REFUSAL = (
    "model.backend=seq2seq: evalflow's hf model runs decoder-only (causal) models only. lm-eval's "
    "seq2seq backend is a second scoring and generation rule (the context through an encoder, each "
    "continuation scored as decoder labels, generation from the encoder's output) that evalflow does "
    "not implement, and answers computed any other way would not be lm-eval's. Evaluate encoder-decoder "
    "models (T5, BART, ...) with lm-eval itself; for a decoder-only model set model.backend=causal "
    "(or default, which picks causal for it)."
)
# torch dtype names lm-eval's get_dtype takes for softmax_dtype and mixed_precision_dtype
DTYPE_NAMES = ("float32", "float16", "bfloat16", "float64", "float", "half", "double")
# from_pretrained arguments that place the weights or say where files come from: never in the key
PLACEMENT_KWARGS = frozenset(
    {
        "low_cpu_mem_usage",
        "device_map",
        "max_memory",
        "offload_folder",
        "offload_buffers",
        "offload_state_dict",
        "cache_dir",
        "local_files_only",
        "token",
        "force_download",
        "proxies",
    }
)
# from_pretrained arguments transformers < 5 folded into a BitsAndBytesConfig, as lm-eval passes them
BNB_SWITCHES = ("load_in_4bit", "load_in_8bit")
BNB_PREFIXES = ("bnb_4bit_", "llm_int8_")


@dataclass(frozen=True)
class LoadArgs:
    """HFLM's loading arguments that reach transformers, peft or a GPTQ loader (``load.load``)."""

    subfolder: str = ""
    use_fast_tokenizer: bool = True
    peft: str | None = None
    delta: str | None = None
    autogptq: bool | str = False
    gptqmodel: bool = False
    tp_plan: Any = None
    # HFLM's **kwargs to from_pretrained: attn_implementation, load_in_4bit/8bit and bnb_* among them
    kwargs: Mapping[str, Any] = field(default_factory=dict)


PLAIN = LoadArgs()  # none of them: the weights as from_pretrained loads them


def parse_backend(backend: Any, refuse_seq2seq: bool = True) -> str:
    """``model.backend``: ``default`` and ``causal`` load ``AutoModelForCausalLM``; ``seq2seq`` is
    refused where it would change the passes (hf's; ``refuse_seq2seq=False``: hf_multimodal's,
    whose image passes never read it, as lm-eval's do not)."""
    if backend == "seq2seq" and refuse_seq2seq:
        raise ConfigError(SEQ2SEQ_REFUSAL)
    if backend not in BACKENDS:
        raise ConfigError(
            f"model.backend {backend!r} is not one of {', '.join(BACKENDS)} (lm-eval's HFLM backends); "
            "set model.backend=default (the model's config decides) or causal."
        )
    return str(backend)


def parse_dtype_name(key: str, value: Any) -> str | None:
    """``model.softmax_dtype`` / ``model.mixed_precision_dtype``: null (off) or a torch dtype's name."""
    if value is None or value in DTYPE_NAMES:
        return value
    raise ConfigError(
        f"model.{key} {value!r} is not a torch dtype; {closest(str(value), DTYPE_NAMES)} "
        f"(or null: {'the logits dtype' if key == 'softmax_dtype' else 'no autocast'}, lm-eval's default)."
    )


def from_pretrained_kwargs(
    attn_implementation: str | None, load_in_4bit: bool, load_in_8bit: bool, extra: Mapping[str, Any] | None
) -> dict[str, Any]:
    """HFLM's ``**kwargs`` to ``from_pretrained``: ``model.from_pretrained_kwargs`` with the named
    keys that lm-eval users pass the same way (``attn_implementation``, ``load_in_4bit``/``8bit``)."""
    out = dict(extra or {})
    named = {"attn_implementation": attn_implementation, "load_in_4bit": load_in_4bit, "load_in_8bit": load_in_8bit}
    for key, value in named.items():
        if value not in (None, False):
            out[key] = value
    return out


def bnb_config_kwargs(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the ``BitsAndBytesConfig`` arguments, the other ``from_pretrained`` arguments): transformers
    4 turned ``load_in_4bit=True, bnb_4bit_quant_type=nf4`` into that config itself; 5 takes only
    ``quantization_config``, so evalflow builds it as 4 did (empty when neither switch is on)."""
    if not any(kwargs.get(k) for k in BNB_SWITCHES):
        return {}, dict(kwargs)
    bnb = {k: v for k, v in kwargs.items() if k in BNB_SWITCHES or k.startswith(BNB_PREFIXES)}
    return bnb, {k: v for k, v in kwargs.items() if k not in bnb}


def checked(config: Mapping[str, Any], refuse_seq2seq: bool = True) -> LoadArgs:
    """The loading arguments of an hf (or hf_multimodal) model config, refused before any model
    call where lm-eval refuses them (``peft`` with ``delta``, ``autogptq`` with ``gptqmodel``,
    ``tp_plan`` with ``parallelize``, a dtype name ``get_dtype`` does not know) or evalflow cannot
    honour them (hf's ``backend=seq2seq``)."""
    parse_backend(config.get("backend", "default"), refuse_seq2seq)
    for key in ("softmax_dtype", "mixed_precision_dtype"):
        parse_dtype_name(key, config.get(key))
    token = config.get("prefix_token_id")
    if token is not None and (isinstance(token, bool) or not isinstance(token, int) or token < 0):
        raise ConfigError(
            f"model.prefix_token_id {token!r} is not a token id; give the id (an integer >= 0) that empty "
            "contexts and rolling windows are conditioned on, or null (BOS, else EOS: lm-eval's default)."
        )
    pairs = (("peft", "delta"), ("autogptq", "gptqmodel"), ("tp_plan", "parallelize"))
    for a, b in pairs:
        if config.get(a) and config.get(b):
            raise ConfigError(
                f"model.{a} and model.{b} are both set; lm-eval's HFLM takes one of them (it raises "
                f"the same): unset model.{b} or model.{a}."
            )
    extra = config.get("from_pretrained_kwargs") or {}
    if not isinstance(extra, Mapping):
        raise ConfigError(
            f"model.from_pretrained_kwargs {extra!r} is not a mapping; give e.g. "
            "model.from_pretrained_kwargs={bnb_4bit_quant_type:nf4} (the model args lm-eval passes to from_pretrained)."
        )
    kwargs = from_pretrained_kwargs(
        config.get("attn_implementation"),
        bool(config.get("load_in_4bit", False)),
        bool(config.get("load_in_8bit", False)),
        extra,
    )
    return LoadArgs(
        subfolder=str(config.get("subfolder") or ""),
        use_fast_tokenizer=bool(config.get("use_fast_tokenizer", True)),
        peft=config.get("peft"),
        delta=config.get("delta"),
        autogptq=config.get("autogptq") or False,
        gptqmodel=bool(config.get("gptqmodel", False)),
        tp_plan=config.get("tp_plan"),
        kwargs=kwargs,
    )


def answer_identity(config: Mapping[str, Any]) -> dict[str, Any]:
    """What these arguments add to the answers' key (``HFModel.identity``); ``subfolder`` is keyed
    with the weights (``identity.weights_identity``: a local subfolder's files, a hub id's name)."""
    return {
        "use_fast_tokenizer": bool(config.get("use_fast_tokenizer", True)),
        "softmax_dtype": config.get("softmax_dtype"),
        "mixed_precision_dtype": config.get("mixed_precision_dtype"),
        "prefix_token_id": config.get("prefix_token_id"),
        **weights_key(checked(config), config.get("revision")),
    }


def weights_key(args: LoadArgs, revision: str | None) -> dict[str, Any]:
    """The part of the key that says how the weights were built beyond their files, the same for
    hf and hf_multimodal (both hand HFLM's loading arguments to one loader, ``load.load_weights``):
    ``from_pretrained``'s arguments but for placement's, the GPTQ loader, the adapter, the delta."""
    return {
        "from_pretrained": {k: repr(v) for k, v in sorted(args.kwargs.items()) if k not in PLACEMENT_KWARGS},
        "gptq": {"autogptq": args.autogptq, "gptqmodel": args.gptqmodel},
        "peft": adapter_identity("model.peft", args.peft, revision),
        "delta": adapter_identity("model.delta", args.delta, revision),
    }


def fast_engine_fits(paths: Paths, config: Mapping[str, Any]) -> tuple[Paths, str | None]:
    """The fast engine's passes compute their own log-softmax in the logits' dtype and are proven
    without autocast: with ``softmax_dtype`` or ``mixed_precision_dtype`` the reference engine runs
    (lm-eval's passes, where both apply as lm-eval applies them), with the one line that says so."""
    named = [k for k in ("softmax_dtype", "mixed_precision_dtype") if config.get(k) is not None]
    if paths == REFERENCE or not named:
        return paths, None
    return REFERENCE, (
        f"hf model: {' and '.join(f'model.{k}' for k in named)} {'apply' if len(named) > 1 else 'applies'} "
        "to lm-eval's passes, which the reference engine runs: this run uses it (the fast engine's speed paths are off)"
    )
