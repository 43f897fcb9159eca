"""The results.json fields lm-eval 0.4.13 derives from the loaded model (``add_tokenizer_info``,
``HFLM.get_model_info``), computed from the model's files without loading its weights, so a run
served wholly from the cache writes the same values as one that loaded the model.

    top level:  tokenizer_pad_token, tokenizer_eos_token, tokenizer_bos_token ([token, "id"]),
                eot_token_id, max_length
    config:     model_num_parameters, model_dtype ("torch.float32"), model_revision, model_sha,
                peft_sha / delta_sha (with model.peft / model.delta)

lm-eval writes them for its models with a Hugging Face tokenizer and model (``hf``,
``hf-multimodal``), the tokenizer fields alone for ``vllm`` (and ``vllm-vlm``) and for ``local-completions`` with a
Hugging Face tokenizer, and none for others (``dummy``, ``local-chat-completions``, whose tokenizer backend is
off by default); evalflow does the same. ``model_sha`` is the hub commit (lm-eval asks the
hub; ``""`` for a local folder, as lm-eval's failed lookup gives); ``peft_sha`` and ``delta_sha`` the
adapter's and the delta's likewise. ``model_num_parameters`` counts the model lm-eval loaded: with a
PEFT adapter, the base's parameters and the adapter's (PeftModel.num_parameters counts both).
"""

from __future__ import annotations

import functools
import json
import logging
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

from evalflow.output.run_paths import RESULTS

LM_EVAL_VERSION = "0.4.13"
"""The lm-eval whose semantics and results layout evalflow follows (results.json's ``lm_eval_version``)."""

log = logging.getLogger(__name__)


def lm_eval_fields(
    model: Mapping[str, Any], identity: Any = None, store: Any = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(top-level fields, ``config`` fields) for the run's model config; empty for other types.
    With ``store`` (the run's cache) they are kept under the model's identity: reading the tokenizer
    costs importing torch and transformers, which a run served from the cache otherwise never does."""
    reader = _READERS.get(str(model.get("type")))
    if reader is None or not model.get(reader[0][0]):
        return {}, {}
    keys, read = reader
    key = tuple(str(model.get(k)) if model.get(k) is not None else None for k in keys)
    memo = None
    if store is not None and identity is not None:
        from evalflow.cache.fingerprint import fingerprint
        from evalflow.cache.store import MISSING

        # the fields are what this transformers release reads from the files (4.x and 5.x read a GGUF's
        # special tokens differently), so its version is in the key; metadata, not an import
        memo = fingerprint(
            ("lm-eval-model-fields", 3, identity, str(model.get("type")), key, _installed("transformers"))
        )
        found = store.get(memo)
        if found is not MISSING:
            top, config = found
            return _with_sha(top, config, identity)
    try:
        top, config = read(*key)
    except Exception as exc:  # a results file must still be written; the fields are then left out
        log.warning("%s: lm-eval's tokenizer and model fields are left out (%s: %s)", RESULTS, type(exc).__name__, exc)
        return {}, {}
    if memo is not None:
        store.put(memo, [top, config], tag="lmeval_fields")
    return _with_sha(top, config, identity)


def _installed(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _with_sha(
    top: Mapping[str, Any], config: Mapping[str, Any], identity: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``model_sha``, and ``peft_sha``/``delta_sha`` for a model with an adapter or a delta: the hub
    commits of the model's identity (models/hf/identity.py), ``""`` for a local folder."""
    if not config:  # model_sha belongs to get_model_info's fields, which only lm-eval's hf models write
        return dict(top), {}
    parts = identity if isinstance(identity, Mapping) else {}
    shas = {"model_sha": _commit(parts.get("weights"))}
    shas.update({f"{key}_sha": _commit(parts[key]) for key in ("peft", "delta") if parts.get(key) is not None})
    return dict(top), {**config, **shas}


def _commit(part: Any) -> str:
    """A hub part's commit; ``""`` where there is none (a local folder, a revision not in the cache)."""
    return str((part.get("commit") if isinstance(part, Mapping) else None) or "")


_HF_KEYS = (
    "pretrained",
    "revision",
    "gguf_file",
    "tokenizer",
    "dtype",
    "add_bos_token",
    "max_length",
    "memo_gguf",
    "trust_remote_code",
    "peft",
)


class _LoadOptions(TypedDict, total=False):
    """``from_pretrained``'s options as lm-eval's HFLM passes them (the config takes the first two)."""

    revision: str
    trust_remote_code: bool
    gguf_file: str
    use_fast: bool
    add_bos_token: bool


@functools.lru_cache(maxsize=8)
def _hf_fields(
    pretrained: str,
    revision: str | None,
    gguf_file: str | None,
    tokenizer: str | None,
    dtype: str | None,
    add_bos_token: str | None,
    max_length: str | None,
    memo_gguf: str | None,
    trust_remote_code: str | None,
    peft: str | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    import transformers

    from evalflow.models.hf.load import configure_pad_token
    from evalflow.models.lmeval_tokens import resolve_max_length

    bos = None if add_bos_token is None else add_bos_token == "True"
    source, gguf = _memo_source(pretrained, gguf_file, dtype or "auto", bos, tokenizer, memo_gguf != "False")
    common: _LoadOptions = {"revision": revision or "main", "trust_remote_code": trust_remote_code == "True"}
    tok_kwargs: _LoadOptions = {**common, **({"gguf_file": gguf} if gguf and not tokenizer else {"use_fast": True})}
    if bos is not None:
        tok_kwargs["add_bos_token"] = bos
    where = Path(tokenizer or source).expanduser()
    # a folder with tokenizer.json (every GGUF memo has one): the fast class directly, the same
    # tokens and ids, in a fraction of AutoTokenizer's seconds of class lookup
    loader = (
        transformers.PreTrainedTokenizerFast
        if not (gguf and not tokenizer) and (where / "tokenizer.json").is_file()
        else transformers.AutoTokenizer
    )
    tok = loader.from_pretrained(tokenizer or source, **tok_kwargs)
    configure_pad_token(tok)
    config = transformers.AutoConfig.from_pretrained(source, gguf_file=gguf, **common)
    top = _token_fields(tok, int(float(max_length)) if max_length else resolve_max_length(config, tok))
    return top, {
        "model_num_parameters": _with_adapter(parameter_count(source, gguf), peft),
        "model_dtype": _dtype(dtype, config),
        "model_revision": revision or "main",
    }


@functools.lru_cache(maxsize=8)
def _api_fields(model: str, tokenizer: str | None, max_length: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``local-completions`` with a Hugging Face tokenizer (TemplateAPI): its tokens as loaded (the
    pad token configured only when the tokenizer comes from the model's name), ``eot_token_id`` the
    eos id and ``max_length`` one less than the setting (a position kept for the generated token).
    No ``config`` fields: lm-eval's API models have no ``get_model_info``."""
    from evalflow.models.api.tokens import load_tokenizer

    tok = load_tokenizer(tokenizer or model)
    if tokenizer is None:
        from evalflow.models.hf.load import configure_pad_token

        configure_pad_token(tok)
    return _token_fields(tok, int(float(max_length or 2048)) - 1), {}


@functools.lru_cache(maxsize=8)
def _vllm_fields(
    pretrained: str,
    tokenizer: str | None,
    revision: str | None,
    max_model_len: str | None,
    max_length: str | None,
    trust_remote_code: str | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """lm-eval's ``VLLM``: its tokenizer (the pad token configured), ``max_length`` the window set
    or the one vLLM derives from the model config. No ``config`` fields (no ``get_model_info``)."""
    import transformers

    from evalflow.models.hf.load import configure_pad_token
    from evalflow.models.lmeval_tokens import resolve_max_length

    remote = trust_remote_code == "True"
    tok = transformers.AutoTokenizer.from_pretrained(tokenizer or pretrained, trust_remote_code=remote)
    configure_pad_token(tok)
    window = max_model_len or max_length
    if window:
        return _token_fields(tok, int(float(window))), {}
    config = transformers.AutoConfig.from_pretrained(pretrained, revision=revision or "main", trust_remote_code=remote)
    return _token_fields(tok, resolve_max_length(config, tok)), {}


def _token_fields(tok: Any, max_length: int) -> dict[str, Any]:
    """lm-eval's ``add_tokenizer_info``."""
    return {
        "tokenizer_pad_token": [tok.pad_token, str(tok.pad_token_id)],
        "tokenizer_eos_token": [tok.eos_token, str(tok.eos_token_id)],
        "tokenizer_bos_token": [tok.bos_token, str(tok.bos_token_id)],
        "eot_token_id": tok.eos_token_id,
        "max_length": max_length,
    }


_VLLM_KEYS = ("pretrained", "tokenizer", "revision", "max_model_len", "max_length", "trust_remote_code")
# model type -> (the config keys its fields are read from, the first one required; the reader)
_READERS: dict[str, tuple[tuple[str, ...], Any]] = {
    "hf": (_HF_KEYS, _hf_fields),
    "hf_multimodal": (_HF_KEYS, _hf_fields),  # HFMultimodalLM is an HFLM: the same fields
    "openai_completions": (("model", "tokenizer", "max_length"), _api_fields),
    "vllm": (_VLLM_KEYS, _vllm_fields),
    "vllm_vlm": (_VLLM_KEYS, _vllm_fields),  # VLLM_VLM is a VLLM: the same fields
}


def _memo_source(
    pretrained: str, gguf_file: str | None, dtype: str, bos: bool | None, tokenizer: str | None, memo: bool
) -> tuple[str, str | None]:
    """The converted folder of a GGUF file when the hf model has kept one (models/hf/gguf_memo.py):
    the same tokenizer and config, read in a second instead of parsing the GGUF file."""
    path = Path(pretrained).expanduser() / gguf_file if gguf_file else None
    if memo and path is not None and path.is_file() and not tokenizer:
        from evalflow.models.hf import gguf_memo

        folder = gguf_memo.memo_folder(path, dtype, bos)
        if (folder / gguf_memo.MARKER).is_file():
            return str(folder), None
    return pretrained, gguf_file


def _dtype(dtype: str | None, config: Any) -> str:
    """lm-eval's ``model.dtype`` as it serializes it: ``torch.float32``; ``auto`` is the checkpoint's."""
    name = dtype if dtype not in (None, "auto") else getattr(config, "torch_dtype", None) or "float32"
    return str(name) if str(name).startswith("torch.") else f"torch.{name}"  # a torch.dtype prints as torch.float32


def parameter_count(source: str, gguf_file: str | None) -> int:
    """The weights' element count from the files' headers (a GGUF file's tensor table, or the
    safetensors headers of a local folder or the local hub cache); -1 (lm-eval's value for a
    model it cannot count) when no such file is at hand."""
    folder = Path(source).expanduser()
    if gguf_file:
        from gguf import GGUFReader

        return int(sum(int(t.n_elements) for t in GGUFReader(str(folder / gguf_file)).tensors))
    if not folder.is_dir():
        try:
            from huggingface_hub import snapshot_download

            folder = Path(snapshot_download(source, allow_patterns=["*.safetensors"], local_files_only=True))
        except Exception:
            return -1
    files = sorted(folder.glob("*.safetensors"))
    return sum(_safetensors_count(f) for f in files) if files else -1


def _with_adapter(base: int, peft: str | None) -> int:
    """The parameters of the model lm-eval counts: the base's, and a PEFT adapter's besides (its
    lora matrices, and its saved copies of whole modules, sit beside the base's weights); -1 when
    either cannot be counted."""
    if peft is None:
        return base
    adapter = parameter_count(peft, None)
    return -1 if -1 in (base, adapter) else base + adapter


def _safetensors_count(path: Path) -> int:
    with path.open("rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    total = 0
    for name, entry in header.items():
        if name != "__metadata__":
            n = 1
            for dim in entry["shape"]:
                n *= int(dim)
            total += n
    return total
