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
only to call :meth:`HFModel.identity`. The torch code lives in ``hf_torch`` and is imported when a
model is built; the pure token rules in ``hf_tokens``, the ordering and batching in ``hf_batching``.

Deviations from HFLM, all without effect on single requests:
- ``batch_size="auto"`` (and ``"auto:N"``) estimates the batch size from the model's sizes and
  free memory (``hf_batching.auto_batch_size``) instead of probing for CUDA out-of-memory;
- generation decides "context already starts with BOS text" per context, where HFLM looks at the
  first context of each batch only (so its answer could depend on the batch);
- sampled generation (``do_sample``) runs one request at a time with torch's RNG seeded from the
  request's ``seed`` and ``repeat``, so samples are reproducible and independent of batching;
- loglikelihood forward passes ask for the logits of the scored positions only (``logits_to_keep``).
"""

from __future__ import annotations

import hashlib
import logging
from contextlib import nullcontext
from typing import Any, Sequence

from evalflow.errors import ConfigError, ModelError, closest
from evalflow.models import hf_identity
from evalflow.models.hf_batching import auto_batch_size, chunk, plan_generation, plan_loglikelihood
from evalflow.models.hf_tokens import (
    check_pair,
    encode_pair,
    model_input,
    normalize_gen_kwargs,
    resolve_max_length,
    rolling_windows,
    stop_sequences,
    strip_at_stops,
)
from evalflow.records import Request

log = logging.getLogger(__name__)

SEQ2SEQ_HINT = "evalflow's hf model runs decoder-only (causal) models; encoder-decoder models are not supported"


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
        **unused: Any,
    ) -> None:
        if unused:
            log.warning("hf model: ignoring unknown config keys %s", sorted(unused))
        self.fixed_batch_size = parse_batch_size(batch_size)
        self.max_batch_size = int(max_batch_size)
        self.add_bos_token = add_bos_token
        self.truncation = bool(truncation)
        self.max_gen_toks = int(max_gen_toks)
        hf_identity.weights_identity(pretrained, revision, gguf_file)  # refuse bad paths before loading
        self._load(pretrained, revision or "main", gguf_file, dtype, device, trust_remote_code, tokenizer)
        self.max_length = int(max_length) if max_length else resolve_max_length(self.model.config, self.tokenizer)
        self._free_bytes: int | None = None

    def _load(
        self,
        pretrained: str,
        revision: str,
        gguf_file: str | None,
        dtype: str,
        device: str,
        trust_remote_code: bool,
        tokenizer: str | None,
    ) -> None:
        """Config, tokenizer and weights as HFLM loads them (``_get_config``, ``_create_tokenizer``, ``_create_model``)."""
        import torch
        import transformers
        from packaging.version import Version
        from transformers.models.auto.modeling_auto import MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES

        from evalflow.models import hf_torch

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
                pretrained, **{dtype_arg: torch_dtype_of(dtype)}, gguf_file=gguf_file, **common
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
        1e-5): ``batch_size``, ``max_batch_size`` (how requests are grouped) and ``device`` (where
        the same weights run). ``trust_remote_code`` only permits loading; the code it runs is in
        the folder fingerprint (``*.py``) or fixed by the hub commit.
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

    def _encode_generation_context(self, string: str) -> list[int]:
        """HFLM.tok_batch_encode for one context: BOS-text check, ``add_bos_token``, ``truncation``."""
        kwargs: dict[str, Any] = {}
        bos_text = getattr(self.tokenizer, "bos_token", None)
        if bos_text is not None and string.startswith(bos_text):
            kwargs["add_special_tokens"] = False
        elif self.add_bos_token is not None:
            kwargs["add_special_tokens"] = self.add_bos_token
        return list(self.tokenizer(string, truncation=self.truncation, **kwargs)["input_ids"])

    # -- batching -----------------------------------------------------------------------------

    def _batch_size_for(self, seq_len: int) -> int:
        if self.fixed_batch_size is not None:
            return self.fixed_batch_size
        from evalflow.models import hf_torch

        if self._free_bytes is None:  # measured once, so batches do not vary with momentary load
            self._free_bytes = hf_torch.free_memory_bytes(self.device)
        return auto_batch_size(hf_torch.model_dims(self.model), seq_len, self._free_bytes, self.max_batch_size)

    def score_pairs(self, pairs: Sequence[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
        """(logprob, is_greedy) of each (context tokens, continuation tokens) pair, in input order.

        Pairs with identical model input share one forward pass; groups run longest first in
        batches (see ``hf_batching``). This is the one place token pairs meet the model.
        """
        import torch

        from evalflow.models import hf_torch

        results: list[tuple[float, bool] | None] = [None] * len(pairs)
        groups = plan_loglikelihood(pairs)
        size_for = lambda g: self._batch_size_for(len(g.rep.ctx) + len(g.rep.cont))  # noqa: E731
        for batch in chunk(groups, size_for):
            inputs = [model_input(g.rep.ctx, g.rep.cont, self.max_length) for g in batch]
            with torch.inference_mode():
                rows = hf_torch.continuation_logprobs(
                    self.model, [x for x, _ in inputs], [c for _, c in inputs], self.device, self._keep_only_needed
                )
                for group, row in zip(batch, rows):
                    for member in group.members:
                        results[member.index] = hf_torch.score(row, member.cont)
        return _complete(results)

    # -- the three request types --------------------------------------------------------------

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        """log P(continuation | context) and whether it is the greedy continuation, per request."""
        pairs = []
        for r in requests:
            context, continuation = r.args
            ctx, cont = encode_pair(self.tok_encode, self._encode_plain, self.prefix_token_id, context, continuation)
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
        contexts = [str(r.args[0]) for r in requests]
        raw_kwargs = [dict(r.args[1]) if len(r.args) > 1 and r.args[1] else {} for r in requests]
        eos_id = self.tokenizer.eos_token_id
        eos = self.tokenizer.decode(eos_id, skip_special_tokens=False) if eos_id is not None else None
        out: list[str | None] = [None] * len(requests)
        for indices in plan_generation(contexts, raw_kwargs, lambda s: len(self.tok_encode(s))):
            kwargs = normalize_gen_kwargs(raw_kwargs[indices[0]], self.max_gen_toks)
            for i, text in self._generate_group([requests[i] for i in indices], kwargs, eos):
                out[indices[i]] = text
        return _complete(out)

    def _generate_group(self, requests: list[Request], kwargs: dict[str, Any], eos: str | None) -> list[tuple[int, str]]:
        """Generate for requests sharing generation kwargs: (position in ``requests``, text) pairs."""
        import torch

        from evalflow.models import hf_torch

        until = stop_sequences(kwargs.pop("until", None), eos)
        max_gen_toks = int(kwargs.pop("max_gen_toks"))
        max_ctx_len = self.max_length - max_gen_toks
        if max_ctx_len <= 0:
            raise ModelError(
                f"max_gen_toks {max_gen_toks} leaves no room for a context in the model's max_length "
                f"{self.max_length}; lower generation_kwargs.max_gen_toks or raise model.max_length."
            )
        encoded = [self._encode_generation_context(str(r.args[0]))[-max_ctx_len:] for r in requests]
        for r, ctx in zip(requests, encoded):
            if not ctx:
                raise ModelError(
                    f"the context of generate_until request {r.args[0]!r} encodes to no tokens and "
                    "this tokenizer adds no BOS, so there is nothing to continue; give it a prompt."
                )
        sampled = bool(kwargs.get("do_sample"))
        size_for = (lambda i: 1) if sampled else (lambda i: self._batch_size_for(len(encoded[i]) + max_gen_toks))
        results = []
        for batch in chunk(list(range(len(requests))), size_for):
            call_kwargs = dict(kwargs)
            padlen = max(len(encoded[i]) for i in batch)
            max_length = int(call_kwargs.pop("max_length", padlen + max_gen_toks))
            rng = hf_torch.seeded(sample_seed(requests[batch[0]]), self.device) if sampled else nullcontext()
            with torch.inference_mode(), rng:
                new_tokens = hf_torch.generate_batch(
                    self.model, self.tokenizer, [encoded[i] for i in batch], until, max_length, call_kwargs, self.device
                )
            for i, toks in zip(batch, new_tokens):
                text = self.tokenizer.decode(toks, skip_special_tokens=True)
                results.append((i, strip_at_stops(text, until)))
        return results


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


def _complete(values: list[Any]) -> list[Any]:
    """The answers in input order; a hole means a request was dropped, which is a bug here."""
    if any(v is None for v in values):
        raise RuntimeError("HFModel lost a request while batching; please report this bug")
    return values


def sample_seed(request: Request) -> int:
    """A seed for one sampled request, stable across processes: from its ``seed`` and ``repeat``."""
    digest = hashlib.sha256(f"{request.seed}:{request.repeat}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


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
