"""Loading a Hugging Face causal LM as lm-eval's ``HFLM`` does, and the settings that shape it.

Kept apart from ``hf`` (which answers requests) because everything here runs once per model:
parsing ``threads`` and ``batch_size``, the dtype, accelerate's placement
(``parallelize``), the tokenizer and weights (``from_pretrained``, GGUF included) and the pad
token. None of it is part of the model's identity except what ``HFModel.identity`` names.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from evalflow.errors import ConfigError, ModelError, closest
from evalflow.models.hf.lmeval_args import PLAIN, LoadArgs, bnb_config_kwargs

log = logging.getLogger(__name__)

SEQ2SEQ_HINT = "evalflow's hf model runs decoder-only (causal) models; encoder-decoder models are not supported"


def default_threads() -> int:
    """Every core this process may run on (its CPU affinity): torch's default thread count here."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def parse_threads(threads: int | None) -> int:
    """torch's CPU threads: the given count, or :func:`default_threads`."""
    if threads is None:
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigError(
            f"model.threads {threads!r} is not a positive integer; set model.threads=2 or leave it unset (all cores)."
        )
    return threads


BATCHING = ("continuous", "lmeval")


def parse_batching(batching: str) -> str:
    """How greedy generation batches: ``continuous`` (default) or ``lmeval`` (lm-eval's own batches)."""
    if batching not in BATCHING:
        raise ConfigError(
            f"model.batching {batching!r} is not one of {', '.join(BATCHING)}; set model.batching=continuous "
            "(rows leave the batch once they stop) or model.batching=lmeval (lm-eval's batches, its exact floats)."
        )
    return batching


def parse_draft_tokens(draft_tokens: int) -> int:
    """Draft tokens a greedy decode row checks per step (``lookup``): a whole number, 0 turns it off."""
    if isinstance(draft_tokens, bool) or not isinstance(draft_tokens, int) or draft_tokens < 0:
        raise ConfigError(
            f"model.draft_tokens {draft_tokens!r} is not a whole number >= 0; set e.g. model.draft_tokens=4 "
            "(each greedy decode step also checks up to 4 tokens copied from the row's own text) or 0 (off)."
        )
    return draft_tokens


def parse_switch(name: str, value: object, meaning: str) -> bool:
    """A boolean model setting ``model.<name>``, refused otherwise; ``meaning`` tells the user what
    each value does."""
    if not isinstance(value, bool):
        raise ConfigError(f"model.{name} {value!r} is not true or false; {meaning}")
    return value


def parse_batch_size(batch_size: int | str) -> int | None:
    """An int batch size, or None for ``auto``/``auto:N`` (the N schedule of lm-eval is not used)."""
    if isinstance(batch_size, str) and batch_size.startswith("auto"):
        return None
    try:
        value = int(batch_size)
    except (TypeError, ValueError):
        value = 0
    if value < 1 or isinstance(batch_size, bool):
        raise ConfigError(
            f"batch_size {batch_size!r} is not a positive integer or 'auto'; set batch_size=8 "
            "(any integer >= 1) or batch_size=auto."
        )
    return value


def load(
    pretrained: str,
    revision: str,
    gguf_file: str | None,
    dtype: str,
    device: str,
    trust_remote_code: bool,
    tokenizer: str | None,
    add_bos_token: bool | None,
    threads: int,
    placement: dict[str, Any],
    memo_gguf: bool = True,
    args: LoadArgs = PLAIN,
    backend: str = "default",
) -> tuple[Any, Any, Any]:
    """(tokenizer, model, input device), loaded as HFLM loads them (``_get_config``,
    ``_create_tokenizer``, ``_create_model``); the model in eval mode, weights tied, pad token set.
    ``device``: a torch device name this machine has (``device.choose`` resolved ``model.device``).
    ``args``: HFLM's other loading arguments (``lmeval_args.checked``); ``backend=causal`` loads a
    model transformers lists as encoder-decoder as a decoder, as lm-eval's does.

    A local GGUF file is converted once and then read from its memo (``gguf_memo``): the same
    tensors and tokenizer, in a second instead of a GGUF parse and dequantization."""
    import torch
    from transformers.models.auto.modeling_auto import MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES

    torch.set_num_threads(threads)
    torch_dtype_of(dtype)  # refuse a bad value before the slow load
    placement = placement_for(args, placement, device)
    from_files = _file_loader(revision, trust_remote_code, tokenizer, add_bos_token, dtype, placement, args)
    try:
        gguf_path = Path(pretrained).expanduser() / gguf_file if gguf_file else None
        if memo_gguf and gguf_path is not None and gguf_path.is_file() and not tokenizer:
            from evalflow.models.hf import gguf_memo

            folder = gguf_memo.memo_folder(gguf_path, dtype, add_bos_token)
            loaded = gguf_memo.load_memo(folder, lambda f: from_files(f, None))
            if loaded is None:
                loaded = from_files(pretrained, gguf_file)
                gguf_memo.write_memo(folder, *loaded)
        else:
            loaded = from_files(pretrained, gguf_file)
    except (OSError, ValueError, AttributeError) as e:
        raise ModelError(
            f"cannot load model.pretrained '{pretrained}' (gguf_file={gguf_file!r}, "
            f"tokenizer={tokenizer!r}): {e}. The Hugging Face hub may be unreachable: give a "
            "local folder written by save_pretrained, or a hub id already in the local HF cache."
        ) from e
    tok, model = loaded
    # HFLM reads the config first to pick its backend; the model's own config is the same one
    # and, for a GGUF file, saves parsing the file once more
    model_type = getattr(model.config, "model_type", None)
    if backend != "causal" and model_type in MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES:
        raise ModelError(f"model '{pretrained}' is a {model_type} model; {SEQ2SEQ_HINT}.")

    def load_delta(source: str) -> Any:
        return from_files(source, None, delta=True)[1]

    model = adapted(model, tok, revision, args, load_delta)
    where = placed(model, device, placement, args)
    configure_pad_token(tok)
    return tok, model, where


def placement_for(args: LoadArgs, placement: dict[str, Any], device: str) -> dict[str, Any]:
    """``from_pretrained``'s placement arguments, as HFLM's ``_create_model`` picks them: ``tp_plan``
    in place of a device map (transformers places the shards), else accelerate's (``placement``,
    from :func:`accelerate_args`), else for a bitsandbytes load lm-eval's ``device_map={"": device}``
    (the quantizer places the weights at load), else none (the model is moved by :func:`placed`)."""
    if args.tp_plan is not None:
        return {"tp_plan": args.tp_plan}
    if not placement and bnb_config_kwargs(args.kwargs)[0]:
        return {"device_map": {"": device}}
    return placement


def placed(model: Any, device: str, placement: dict[str, Any], args: LoadArgs) -> Any:
    """The device inputs go to, with the model there in eval mode and its weights tied (HFLM's
    ``__init__``): a model placed at load (a device map, a GPTQ loader, a quantizer) stays where it
    is and inputs go where its embeddings are; any other is moved whole to ``device``."""
    import torch

    if placement or args.autogptq or quantized(model):
        where = model.get_input_embeddings().weight.device
    else:
        where = torch.device(device)
        model.to(where)
    model.eval()
    model.tie_weights()
    return where


def quantized(model: Any) -> bool:
    """Whether the weights were quantized at load: bitsandbytes places them itself (lm-eval's
    ``model.to`` fails on them and it goes on where they are)."""
    return bool(getattr(model, "is_quantized", False) or getattr(model, "hf_quantizer", None))


def adapted(model: Any, tok: Any, revision: str, args: LoadArgs, load_delta: Callable[[str], Any]) -> Any:
    """The loaded model with the adapter or delta weights lm-eval applies after loading it
    (``load_delta``: the delta model from its source, by the same class and arguments as the base)."""
    from evalflow.models.hf import adapters

    if args.peft:
        return adapters.with_peft(model, tok, args.peft, revision)
    if args.delta:
        return adapters.add_delta(model, args.delta, load_delta)
    return model


def load_weights(
    auto_class: Any,
    source: str,
    dtype: str,
    revision: str,
    trust_remote_code: bool,
    args: LoadArgs,
    placement: dict[str, Any],
    gguf: str | None = None,
    delta: bool = False,
) -> Any:
    """HFLM's ``_create_model`` call for one class (``AutoModelForCausalLM`` for hf,
    ``AutoModelForImageTextToText`` for hf_multimodal): ``from_pretrained`` with the dtype,
    ``subfolder``, the GGUF file and HFLM's **kwargs (``args.kwargs``) beside ``placement``, or a
    GPTQ loader (``args.autogptq``, ``args.gptqmodel``). ``delta=True``: the delta model, as lm-eval
    loads it (no subfolder, no GGUF, never through a GPTQ loader)."""
    import transformers
    from packaging.version import Version

    from evalflow.models.hf import adapters

    common = {"revision": revision, "trust_remote_code": trust_remote_code}
    # transformers renamed torch_dtype to dtype in 4.56; lm-eval passes whichever exists
    dtype_arg = "dtype" if Version(transformers.__version__) >= Version("4.56.0") else "torch_dtype"
    kwargs = {**model_kwargs(args.kwargs), **placement}
    if delta:
        return auto_class.from_pretrained(source, **{dtype_arg: torch_dtype_of(dtype)}, **kwargs, **common)
    if args.autogptq or args.gptqmodel:
        return adapters.gptq_model(source, args.autogptq, args.gptqmodel, trust_remote_code, kwargs)
    where = {"subfolder": args.subfolder} if args.subfolder else {}
    try:
        return auto_class.from_pretrained(
            source, **{dtype_arg: torch_dtype_of(dtype)}, gguf_file=gguf, **where, **kwargs, **common
        )
    except TypeError as e:  # an argument from_pretrained (or the model class) does not take
        raise ModelError(
            f"from_pretrained refused an argument: {e}. Model args that are not keys of the model's preset "
            f"(conf/model/hf.yaml, conf/model/hf_multimodal.yaml) go to from_pretrained as lm-eval's HFLM "
            f"passes them (here model.from_pretrained_kwargs={dict(args.kwargs)}); remove or fix the one named."
        ) from e


def _file_loader(
    revision: str,
    trust_remote_code: bool,
    tokenizer: str | None,
    add_bos_token: bool | None,
    dtype: str,
    placement: dict[str, Any],
    args: LoadArgs = PLAIN,
) -> Callable[..., tuple[Any, Any]]:
    """``from_files(source, gguf)``: the tokenizer and model from a folder or hub id (and GGUF
    file), with HFLM's arguments: the tokenizer from the GGUF file unless one is named, the slow
    tokenizer with ``use_fast_tokenizer=false``, both from ``subfolder``; the weights by
    :func:`load_weights`. ``delta=True``: the delta model alone (no tokenizer)."""
    import transformers

    causal = transformers.AutoModelForCausalLM

    def from_files(source: str, gguf: str | None, delta: bool = False) -> tuple[Any, Any]:
        if delta:
            return None, load_weights(causal, source, dtype, revision, trust_remote_code, args, placement, delta=True)
        tok_kwargs: dict[str, Any] = {"revision": revision, "trust_remote_code": trust_remote_code}
        if args.subfolder:
            tok_kwargs["subfolder"] = args.subfolder
        if not tokenizer and gguf is not None:
            tok_kwargs["gguf_file"] = gguf  # the tokenizer is embedded in the GGUF file
        else:
            tok_kwargs["use_fast"] = args.use_fast_tokenizer
        if add_bos_token is not None:
            tok_kwargs["add_bos_token"] = add_bos_token
        tok = transformers.AutoTokenizer.from_pretrained(tokenizer or source, **tok_kwargs)
        return tok, load_weights(causal, source, dtype, revision, trust_remote_code, args, placement, gguf)

    return from_files


def model_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """HFLM's **kwargs as this transformers takes them: ``load_in_4bit``/``load_in_8bit`` and their
    ``bnb_4bit_*``/``llm_int8_*`` settings as one ``BitsAndBytesConfig`` (``bnb_4bit_compute_dtype``
    a torch dtype, as lm-eval's ``get_dtype`` makes it), the rest as they are."""
    bnb, rest = bnb_config_kwargs(kwargs)
    if not bnb:
        return rest
    import transformers

    if "bnb_4bit_compute_dtype" in bnb:
        bnb["bnb_4bit_compute_dtype"] = torch_dtype_of(bnb["bnb_4bit_compute_dtype"])
    return {**rest, "quantization_config": transformers.BitsAndBytesConfig(**bnb)}


def accelerate_args(
    parallelize: bool,
    device_map: Any,
    max_memory_per_gpu: int | str | None,
    max_cpu_memory: int | str | None,
    offload_folder: str,
) -> dict[str, Any]:
    """lm-eval's ``_get_accelerate_args`` for one process: with ``parallelize``, accelerate places
    the layers (``device_map``, default "auto") within ``max_memory`` (per visible GPU, plus the
    CPU); without it the model goes whole to ``device`` and, as in lm-eval, ``device_map`` is unused.
    """
    if not parallelize:
        if device_map is not None:
            log.warning(
                "hf model: device_map=%r is used only with parallelize=true (as in lm-eval); ignoring it", device_map
            )
        return {}
    import torch

    max_memory: dict[Any, Any] | None = None
    if max_memory_per_gpu is not None:
        max_memory = dict.fromkeys(range(torch.cuda.device_count()), max_memory_per_gpu)
    if max_cpu_memory is not None:
        max_memory = {**(max_memory or {}), "cpu": max_cpu_memory}
    return {
        "device_map": "auto" if device_map is None else device_map,
        "max_memory": max_memory,
        "offload_folder": offload_folder,
    }


DTYPES = ("auto", "float32", "float16", "bfloat16", "float64", "float", "half", "double")


def torch_dtype_of(dtype: Any) -> Any:
    """lm-eval's ``get_dtype``: "auto" stays "auto", a name becomes the torch dtype of that name."""
    import torch

    if dtype == "auto" or not isinstance(dtype, str):
        return dtype
    value = getattr(torch, dtype, None)
    if not isinstance(value, torch.dtype):
        raise ConfigError(f"model.dtype '{dtype}' is not a torch dtype; {closest(dtype, DTYPES)}")
    return value


def configure_pad_token(tokenizer: Any) -> None:
    """lm-eval's ``configure_pad_token``: keep a pad token, else use UNK, else EOS, else add one."""
    if getattr(tokenizer, "pad_token_id", None) is not None or getattr(tokenizer, "pad_token", None):
        return
    if getattr(tokenizer, "unk_token", None):
        tokenizer.pad_token_id = tokenizer.unk_token_id
    elif getattr(tokenizer, "eos_token", None):
        tokenizer.pad_token_id = tokenizer.eos_token_id
    else:
        tokenizer.add_special_tokens({"pad_token": "<|pad|>"})
