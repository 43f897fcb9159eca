"""Hugging Face causal LMs with the exact request semantics of lm-eval 0.4.13's ``HFLM``.

Same tokenization of (context, continuation) pairs, same BOS rules, same left truncation, same
rolling windows, same stop-sequence handling, same request order and batch grouping: the numbers
match lm-eval's to float noise (``tests/models/test_smollm2.py`` checks this against lm-eval).

    from evalflow.models.hf import HFModel
    from evalflow.records import Request

    m = HFModel("/path/to/folder", gguf_file="model.gguf", dtype="float32", batch_size=8)
    m.loglikelihood([Request("loglikelihood", ("2+2=", " 4"))])        # [(-0.31, True)]
    m.generate_until([Request("generate_until", ("2+2=", {"until": ["\n"]}))])  # [" 4"]

This module imports neither torch nor transformers at import time: a fully cached run imports it
only to call :meth:`HFModel.identity`. The rest is imported when a model is built: the pure token
rules in ``hf_tokens``, lm-eval's ordering and batching in ``hf_batching``, prefix-sharing plans in
``hf_prefix`` and ``hf_pack`` (pure), scoring in ``hf_score``, generation in ``hf_generate``, and
the torch code in ``hf_torch`` (plain passes, generate) and ``hf_kv`` (packed passes, key/values).

Deviations from HFLM, all without effect on single requests:
- ``batch_size="auto"`` (and ``"auto:N"``) estimates the batch size from the model's sizes and
  free memory (``hf_batching.auto_batch_size``) instead of probing for CUDA out-of-memory;
- generation decides "context already starts with BOS text" per context, where HFLM looks at the
  first context of each batch only (so its answer could depend on the batch);
- sampled generation (``do_sample``) runs one request at a time with torch's RNG seeded from the
  request's ``seed`` and ``repeat``, so samples are reproducible and independent of batching;
- forward passes ask for the logits of the scored positions only (``logits_to_keep``);
- each distinct token prefix is run once (``prefix_sharing``, on by default): a question's context
  once for all its choices, packed with other questions into rows without padding; a few-shot
  prefix common to many documents once, its key/values reused by all of them, and across chunks
  of requests through a small memo; generation runs each context alone (no padding) and starts
  ``generate`` from those key/values. The same numbers up to float summation order (within 1e-5
  of the plain computation on a tiny Llama, 1e-3 of lm-eval on SmolLM2). Applies to decoders with
  full attention in every layer, after a numerical self-check on the loaded model; anything else
  (and ``prefix_sharing=False``) runs lm-eval's plain path.

Speed settings that never change answers, hence are not part of the model's identity:
``batch_size``, ``max_batch_size``, ``device``, ``parallelize``/``device_map``/``max_memory_per_gpu``/
``max_cpu_memory``/``offload_folder`` (where the layers run, via accelerate), ``threads`` (torch's CPU threads; default all
cores this process may use) and ``prefix_sharing``.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Sequence

from evalflow.errors import ConfigError, ModelError, closest
from evalflow.models import hf_identity
from evalflow.models.hf_batching import auto_batch_size
from evalflow.models.hf_prefix import PrefixMemo
from evalflow.models.hf_tokens import check_pair, encode_pair, resolve_max_length, rolling_windows
from evalflow.records import Request

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
        raise ConfigError(f"model.threads {threads!r} is not a positive integer; set model.threads=2 or leave it unset (all cores).")
    return threads


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


class HFModel:
    """A transformers ``AutoModelForCausalLM`` answering lm-eval's three request types."""

    def __init__(
        self,
        pretrained: str,
        *,
        revision: str | None = None,
        gguf_file: str | None = None,
        dtype: str = "auto",
        device: str = "cpu",
        batch_size: int | str = 1,
        max_batch_size: int = 64,
        max_length: int | None = None,
        max_gen_toks: int = 256,
        add_bos_token: bool | None = None,
        truncation: bool = False,
        trust_remote_code: bool = False,
        tokenizer: str | None = None,
        threads: int | None = None,
        prefix_sharing: bool = True,
        parallelize: bool = False,
        device_map: Any = None,
        max_memory_per_gpu: int | str | None = None,
        max_cpu_memory: int | str | None = None,
        offload_folder: str = "./offload",
        **unused: Any,
    ) -> None:
        if unused:
            log.warning("hf model: ignoring unknown config keys %s", sorted(unused))
        self.threads = parse_threads(threads)
        self.fixed_batch_size = parse_batch_size(batch_size)
        self.max_batch_size = int(max_batch_size)
        self.add_bos_token = add_bos_token
        self.truncation = bool(truncation)
        self.max_gen_toks = int(max_gen_toks)
        hf_identity.weights_identity(pretrained, revision, gguf_file)  # refuse bad paths before loading
        placement = accelerate_args(parallelize, device_map, max_memory_per_gpu, max_cpu_memory, offload_folder)
        self._load(pretrained, revision or "main", gguf_file, dtype, device, trust_remote_code, tokenizer, placement)
        self.max_length = int(max_length) if max_length else resolve_max_length(self.model.config, self.tokenizer)
        self._free_bytes: int | None = None
        self.min_prefix = 8  # shorter shared prefixes save less than the extra pass costs
        self._exact_keep = False
        self.prefix_memo: PrefixMemo[Any] = PrefixMemo(capacity=8, max_bytes=256 * 2**20, size_of=lambda s: s.nbytes)
        self.share_prefixes = bool(prefix_sharing) and self._kv_reuse_works()

    def _load(
        self,
        pretrained: str,
        revision: str,
        gguf_file: str | None,
        dtype: str,
        device: str,
        trust_remote_code: bool,
        tokenizer: str | None,
        placement: dict[str, Any],
    ) -> None:
        """Config, tokenizer and weights as HFLM loads them (``_get_config``, ``_create_tokenizer``, ``_create_model``)."""
        import torch
        import transformers
        from packaging.version import Version
        from transformers.models.auto.modeling_auto import MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES

        from evalflow.models import hf_torch

        torch.set_num_threads(self.threads)
        common = {"revision": revision, "trust_remote_code": trust_remote_code}
        torch_dtype_of(dtype), torch_device_of(device)  # refuse bad values before the slow load
        try:
            tok_kwargs: dict[str, Any] = dict(common)
            if not tokenizer and gguf_file is not None:
                tok_kwargs["gguf_file"] = gguf_file  # the tokenizer is embedded in the GGUF file
            else:
                tok_kwargs["use_fast"] = True
            if self.add_bos_token is not None:
                tok_kwargs["add_bos_token"] = self.add_bos_token
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer or pretrained, **tok_kwargs)
            # transformers renamed torch_dtype to dtype in 4.56; lm-eval passes whichever exists
            dtype_arg = "dtype" if Version(transformers.__version__) >= Version("4.56.0") else "torch_dtype"
            self.model = transformers.AutoModelForCausalLM.from_pretrained(
                pretrained, **{dtype_arg: torch_dtype_of(dtype)}, gguf_file=gguf_file, **placement, **common
            )
        except (OSError, ValueError, AttributeError) as e:
            raise ModelError(
                f"cannot load model.pretrained '{pretrained}' (gguf_file={gguf_file!r}, "
                f"tokenizer={tokenizer!r}): {e}. The Hugging Face hub may be unreachable: give a "
                "local folder written by save_pretrained, or a hub id already in the local HF cache."
            ) from e
        # HFLM reads the config first to pick its backend; the model's own config is the same one
        # and, for a GGUF file, saves parsing the file once more
        model_type = getattr(self.model.config, "model_type", None)
        if model_type in MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES:
            raise ModelError(f"model '{pretrained}' is a {model_type} model; {SEQ2SEQ_HINT}.")
        if placement:  # accelerate spread the layers; inputs go where the embeddings are
            self.device = self.model.get_input_embeddings().weight.device
        else:
            self.device = torch_device_of(device)
            self.model.to(self.device)
        self.model.eval()
        self.model.tie_weights()
        configure_pad_token(self.tokenizer)
        self._keep_only_needed = hf_torch.accepts_logits_to_keep(self.model)

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        """What the response cache is keyed by, computed without loading the model or importing torch.

        Excluded, because they do not change answers (beyond float noise of batch shapes, within
        1e-5): ``batch_size``, ``max_batch_size``, ``prefix_sharing`` (how requests are grouped and
        which key/values are reused), ``device``, ``threads`` and the accelerate placement
        settings (where the same weights run). ``trust_remote_code`` only permits loading; the
        code it runs is in the folder fingerprint (``*.py``) or fixed by the hub commit.
        """
        pretrained = config.get("pretrained")
        if not isinstance(pretrained, str) or not pretrained:
            raise ConfigError(
                "model.pretrained is not set: give a local model folder or a Hugging Face hub id, "
                "e.g. model=hf model.pretrained=/path/to/model (or model=smollm2)."
            )
        revision = config.get("revision")
        return {
            "backend": "hf-causal",
            "semantics": "lm-eval-0.4.13",
            "identity_version": hf_identity.IDENTITY_VERSION,
            "weights": hf_identity.weights_identity(pretrained, revision, config.get("gguf_file")),
            "tokenizer": hf_identity.tokenizer_identity(config.get("tokenizer"), revision),
            "dtype": str(config.get("dtype", "auto")),
            "add_bos_token": config.get("add_bos_token"),
            "max_length": config.get("max_length"),
            "truncation": bool(config.get("truncation", False)),
            "max_gen_toks": int(config.get("max_gen_toks", 256)),
            "libraries": hf_identity.library_versions(),
        }

    # -- tokenization (HFLM.tok_encode and friends) -------------------------------------------

    @property
    def prefix_token_id(self) -> int:
        """The token an empty context or a rolling text is conditioned on: BOS, else EOS."""
        bos = self.tokenizer.bos_token_id
        return int(bos if bos is not None else self.tokenizer.eos_token_id)

    def tok_encode(self, string: str, add_special_tokens: bool | None = None) -> list[int]:
        """HFLM.tok_encode: special tokens as the tokenizer / ``add_bos_token`` decide, no BOS twice."""
        kwargs: dict[str, Any] = {}
        if add_special_tokens is not None:
            kwargs["add_special_tokens"] = add_special_tokens
        elif self.add_bos_token is not None:
            kwargs["add_special_tokens"] = self.add_bos_token
        if add_special_tokens is None and string.startswith(self.tokenizer.decode(self.prefix_token_id)):
            kwargs["add_special_tokens"] = False
        return list(self.tokenizer.encode(string, **kwargs))

    def _encode_plain(self, string: str) -> list[int]:
        return self.tok_encode(string, add_special_tokens=False)

    def encode_generation_context(self, string: str) -> list[int]:
        """HFLM.tok_batch_encode for one context: BOS-text check, ``add_bos_token``, ``truncation``."""
        kwargs: dict[str, Any] = {}
        bos_text = getattr(self.tokenizer, "bos_token", None)
        if bos_text is not None and string.startswith(bos_text):
            kwargs["add_special_tokens"] = False
        elif self.add_bos_token is not None:
            kwargs["add_special_tokens"] = self.add_bos_token
        return list(self.tokenizer(string, truncation=self.truncation, **kwargs)["input_ids"])

    # -- batching and key/value reuse ---------------------------------------------------------

    def batch_size_for(self, seq_len: int) -> int:
        """Rows per forward pass for sequences of ``seq_len`` tokens: fixed, or estimated (auto)."""
        if self.fixed_batch_size is not None:
            return self.fixed_batch_size
        from evalflow.models import hf_torch

        if self._free_bytes is None:  # measured once, so batches do not vary with momentary load
            self._free_bytes = hf_torch.free_memory_bytes(self.device)
        return auto_batch_size(hf_torch.model_dims(self.model), seq_len, self._free_bytes, self.max_batch_size)

    def _kv_reuse_works(self) -> bool:
        """Prefix sharing applies to this architecture and reproduces the plain computation here."""
        from evalflow.models import hf_kv

        if not hf_kv.supports_kv_reuse(self.model):
            log.info("hf model: %s keeps the plain path (no key/value reuse)", type(self.model).__name__)
            return False
        self._exact_keep = hf_kv.exact_keep_supported(self.model)
        try:
            error = hf_kv.kv_reuse_error(self.model, self.device, self._exact_keep)
        except Exception as e:  # an architecture or transformers version the cache layers do not fit
            log.warning("hf model: key/value reuse fails on %s (%s); not using it", type(self.model).__name__, e)
            return False
        tolerance = 1e-3 if self.model.dtype.itemsize >= 4 else 0.1
        if not error <= tolerance:  # also catches NaN
            log.warning("hf model: key/value reuse differs from the plain pass by %.3g; not using it", error)
            return False
        return True

    def score_pairs(self, pairs: Sequence[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
        """(logprob, is_greedy) of each (context tokens, continuation tokens) pair, in input order."""
        from evalflow.models import hf_score

        setup = hf_score.ScoringSetup(
            self.model, self.device, self.max_length, self.batch_size_for, self._keep_only_needed,
            self.share_prefixes, self._exact_keep, self.min_prefix, self.prefix_memo,
        )
        return hf_score.score_pairs(setup, pairs)

    # -- the three request types --------------------------------------------------------------

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        """log P(continuation | context) and whether it is the greedy continuation, per request."""
        encoded: dict[str, list[int]] = {}  # the choices of a question share one context encoding

        def encode(text: str) -> list[int]:
            if text not in encoded:
                encoded[text] = self.tok_encode(text)
            return encoded[text]

        pairs = []
        for r in requests:
            context, continuation = r.args
            ctx, cont = encode_pair(encode, self._encode_plain, self.prefix_token_id, context, continuation)
            check_pair(ctx, cont, self.max_length, r.args)
            pairs.append((ctx, cont))
        return self.score_pairs(pairs)

    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]:
        """Total log-probability of each text, scored in disjoint windows of ``max_length`` tokens."""
        pairs: list[tuple[list[int], list[int]]] = []
        owners: list[int] = []
        for i, r in enumerate(requests):
            (text,) = r.args
            windows = rolling_windows(self.tok_encode(text), self.prefix_token_id, self.max_length)
            pairs.extend(windows)
            owners.extend([i] * len(windows))
        totals = [0.0] * len(requests)
        for owner, (logprob, _) in zip(owners, self.score_pairs(pairs)):
            totals[owner] += logprob
        return totals

    def generate_until(self, requests: Sequence[Request]) -> list[str]:
        """Generated text per request, cut at the first stop sequence (``until`` and EOS)."""
        from evalflow.models import hf_generate

        return hf_generate.generate_until(self, requests)


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
            log.warning("hf model: device_map=%r is used only with parallelize=true (as in lm-eval); ignoring it", device_map)
        return {}
    import torch

    max_memory: dict[Any, Any] | None = None
    if max_memory_per_gpu is not None:
        max_memory = {i: max_memory_per_gpu for i in range(torch.cuda.device_count())}
    if max_cpu_memory is not None:
        max_memory = {**(max_memory or {}), "cpu": max_cpu_memory}
    return {"device_map": "auto" if device_map is None else device_map, "max_memory": max_memory, "offload_folder": offload_folder}


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


def torch_device_of(device: str) -> Any:
    """The torch device for model.device, refusing ones this machine does not have."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ConfigError(f"model.device '{device}' is not a device name ({e}); use cpu, cuda or cuda:N.") from e
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ModelError(f"model.device is '{device}' but torch sees no CUDA device here; set model.device=cpu.")
    return dev


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
