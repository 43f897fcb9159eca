"""Hugging Face causal LMs with the exact request semantics of lm-eval 0.4.13's ``HFLM``.

Same tokenization of (context, continuation) pairs, same BOS rules, same left truncation, same
rolling windows, same stop-sequence handling, same request order and batch grouping: the numbers
match lm-eval's to float noise (``tests/models/test_smollm2.py`` checks this against lm-eval).

    from evalflow.models.hf import HFModel
    from evalflow.core.records import Request

    m = HFModel("/path/to/folder", gguf_file="model.gguf", dtype="float32", batch_size=8)
    m.loglikelihood([Request("loglikelihood", ("2+2=", " 4"))])        # [(-0.31, True)]
    m.generate_until([Request("generate_until", ("2+2=", {"until": ["\n"]}))])  # [" 4"]

This module imports neither torch nor transformers at import time: a fully cached run imports it
only to call :meth:`HFModel.identity`. The rest of the package is imported when a model is built,
and its imports point one way, from this class down. Two rooms:

- the semantics, beside this module, whose source is the answers' cache key (:data:`SEMANTICS`):
  ``answer_key`` and ``identity`` (cache key), ``load`` (settings, loading), ``lmeval_args`` and
  ``adapters`` (lm-eval HFLM's other loading arguments: peft, delta, quantizers, dtypes),
  ``gguf_memo`` (GGUF conversions kept on disk), ``evalflow.models.lmeval_tokens`` (lm-eval's
  token rules), ``batching`` (lm-eval's ordering and batch grouping), ``engine``
  (``model.engine``: which paths run), the passes
  ``score`` (log-likelihoods) and ``generate`` (``generate_until``), lm-eval's rules only, which
  take a setup object rather than this class, on ``torch_ops`` (plain passes, ``model.generate``);
- the speed engine, ``fast/`` (``model.engine=fast``, the default), entered through one module,
  ``fast.fast_engine``, imported only when the fast engine runs: its load-time checks, prefix
  sharing (``shared_scoring``, ``shared_generation``, ``prefix``, ``pack``, ``kv``), greedy
  continuous batching (``decode``, ``stream``, ``lookup``, ``shared_attention``,
  ``native_attention``) and ``packed_linear``. It plugs into the passes through their setup
  objects (``ScoringSetup.shared``, ``GenerationSetup.answer_group``); no semantic module imports
  it. Not in the key (see :data:`SEMANTICS`); on a device it is not proven on
  (``engine.PROVEN_DEVICES``) the model runs the reference engine unless ``force_fast``.

Deviations from HFLM, all without effect on single requests:
- ``batch_size="auto"`` (and ``"auto:N"``) estimates the batch size from the model's sizes and
  free memory (``batching.auto_batch_size``) instead of probing for CUDA out-of-memory;
- generation decides "context already starts with BOS text" per context, where HFLM looks at the
  first context of each batch only (so its answer could depend on the batch);
- sampled generation (``do_sample``) runs one request at a time with torch's RNG seeded from the
  request's ``seed`` and ``repeat``, so samples are reproducible and independent of batching;
- (``engine=fast``) forward passes ask for the logits of the scored positions only (``logits_to_keep``);
- (``engine=fast``) each distinct token prefix is run once (``prefix_sharing``, on by default): a question's context
  once for all its choices, packed with other questions into rows without padding; a few-shot
  prefix common to many documents once, its key/values reused by all of them, and across chunks
  of requests through a small memo; generation runs each context alone (no padding) and starts
  ``generate`` from those key/values. The same numbers up to float summation order (within 1e-5
  of the plain computation on a tiny Llama, 1e-3 of lm-eval on SmolLM2). Applies to decoders with
  full attention in every layer, after a numerical self-check on the loaded model; anything else
  (and ``prefix_sharing=False``, and ``engine=reference``) runs lm-eval's plain path;
- (``engine=fast``) greedy generation batches continuously (``batching="continuous"``, ``decode``): a row leaves the
  batch as soon as it stops and the next request takes its place, where lm-eval runs each batch
  until its longest row stops. Each row's tokens are the same function of its own context; the
  batch it shares a step with changes float summation order only. ``batching="lmeval"`` runs
  lm-eval's batches through ``model.generate``.

Speed settings that never change answers, hence are not part of the model's identity:
``batch_size``, ``max_batch_size``, ``device`` (``auto``: CUDA, else MPS, else the CPU; a device not
here falls back as lm-eval's does: ``hf.device``), ``force_fast`` (the fast engine on a device where it is
not proven), ``parallelize``/``device_map``/``max_memory_per_gpu``/
``max_cpu_memory``/``offload_folder`` (where the layers run, via accelerate), ``tp_plan``,
``logits_cache`` (lm-eval's: requests with one model input share a pass), ``memo_gguf`` (keep a
GGUF file's dequantized weights on disk, ``gguf_memo``), ``threads`` (torch's CPU threads; default all
cores this process may use) and the fast engine's fine switches, for benchmarks: ``prefix_sharing``,
``batching``, ``draft_tokens``, ``native_attention`` (the decode loop's attention, steps and prompt
prefill, in a compiled kernel on x86 CPUs) and ``packed_linear`` (linear layers through oneDNN with
weights packed once, on a CPU in fp32). ``engine`` is part of it (see :meth:`HFModel.identity`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar

from evalflow.core.records import Generation, Request
from evalflow.models.hf import answer_key, lmeval_args, load
from evalflow.models.hf.batching import CPU_PASS_ROWS, auto_batch_size, auto_decode_slots
from evalflow.models.hf.device import choose
from evalflow.models.hf.engine import REFERENCE, engine_paths, parse_engine, proven_paths
from evalflow.models.hf.identity import weights_identity
from evalflow.models.lmeval_tokens import (
    check_pair,
    encode_pair,
    prefix_token,
    resolve_max_length,
    rolling_windows,
    tok_encode,
)
from evalflow.models.protocol import LanguageModel

log = logging.getLogger(__name__)

# The modules that define what an HF model's answer is (with this one, which defines the class):
# tokenisation, the scoring rule, the generation rule. Their source is part of every HF answer's
# cache key (``registry.model_code_hash`` via ``HFModel.CODE``), so an edit to any of them re-runs
# inference; none of them imports ``fast/`` (tests/models/test_hf_key.py).
# Out of the key by design: the speed engine ``fast/`` (its Python modules and the C kernel's
# source, ``fast/native/decode_attention.c``), because tests prove each of its paths gives the
# reference path's answers (greedy text identical, log-likelihoods within the parity tolerance):
# tests/models/test_hf_engine.py::test_each_fast_path_gives_the_reference_answers, test_hf_kv.py
# (shared prefixes against one request at a time), test_hf_generate.py and test_hf_stream.py
# (continuous batching against model.generate), test_hf_lookup.py (draft tokens),
# test_hf_shared_attention.py and test_hf_native_attention.py (the decode step's attention against
# torch's), test_hf_packed_linear.py (oneDNN against torch's linear layers). An edit there re-runs no
# answer; the test that proves it equal must pass instead. Also out: ``device`` (where, not what)
# and the VLM room (``vlm/``, keyed by its own class).
SEMANTICS = tuple(
    f"evalflow.models.{m}"
    for m in (
        "hf.load",
        "hf.lmeval_args",
        "hf.adapters",
        "hf.gguf_memo",
        "hf.identity",
        "hf.answer_key",
        "hf.batching",
        "hf.engine",
        "hf.score",
        "hf.generate",
        "hf.finish",
        "hf.torch_ops",
        "lmeval_tokens",
    )
)


class HFModel(LanguageModel):
    """A transformers ``AutoModelForCausalLM`` answering lm-eval's three request types."""

    RUN_SETTINGS: ClassVar[tuple[str, ...]] = ("batch_size", "max_batch_size")  # the run's, over the config's
    CODE: ClassVar[tuple[str, ...]] = SEMANTICS

    def __init__(
        self,
        pretrained: str,
        *,
        revision: str | None = None,
        gguf_file: str | None = None,
        dtype: str = "auto",
        device: str = "auto",
        engine: str = "fast",
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
        memo_gguf: bool = True,
        batching: str = "continuous",
        draft_tokens: int = 4,
        native_attention: bool = True,
        packed_linear: bool = True,
        force_fast: bool = False,
        backend: str = "default",
        subfolder: str = "",
        use_fast_tokenizer: bool = True,
        logits_cache: bool = True,
        softmax_dtype: str | None = None,
        mixed_precision_dtype: str | None = None,
        prefix_token_id: int | None = None,
        tp_plan: Any = None,
        attn_implementation: str | None = None,
        load_in_4bit: bool = False,
        load_in_8bit: bool = False,
        autogptq: bool | str = False,
        gptqmodel: bool = False,
        peft: str | None = None,
        delta: str | None = None,
        from_pretrained_kwargs: dict[str, Any] | None = None,
        **unused: Any,
    ) -> None:
        if unused:
            log.warning("hf model: ignoring unknown config keys %s", sorted(unused))
        self.engine = parse_engine(engine)
        self.threads = load.parse_threads(threads)
        self.fixed_batch_size = load.parse_batch_size(batch_size)
        self.max_batch_size = int(max_batch_size)
        self.paths = engine_paths(
            self.engine,
            bool(prefix_sharing),
            load.parse_batching(batching),
            load.parse_draft_tokens(draft_tokens),
            load.parse_switch(
                "native_attention",
                native_attention,
                "set model.native_attention=false to decode with "
                "torch's attention kernel, or leave it out (default true: a compiled kernel on x86 CPUs with AVX2).",
            ),
            load.parse_switch(
                "packed_linear",
                packed_linear,
                "set model.packed_linear=false to keep torch's linear "
                "layers, or leave it out (default true: on a CPU in fp32, oneDNN with the weights packed once).",
            ),
        )
        self.add_bos_token = add_bos_token
        self.truncation = bool(truncation)
        self.max_gen_toks = int(max_gen_toks)
        lm_args = {k: v for k, v in locals().items() if k in lmeval_args.CONFIG_KEYS}
        args = lmeval_args.checked(lm_args)  # refuse bad values and pairs before loading
        weights_identity(pretrained, revision, gguf_file, args.subfolder)
        self.custom_prefix_token_id = prefix_token_id
        self.logits_cache = bool(logits_cache)
        self.softmax_dtype = softmax_dtype
        force = load.parse_switch(
            "force_fast",
            force_fast,
            "set model.force_fast=true to run the fast engine on a "
            "device it is not proven on (only the CPU is, so far), or leave it out (default false).",
        )
        placement = load.accelerate_args(parallelize, device_map, max_memory_per_gpu, max_cpu_memory, offload_folder)
        self.tokenizer, self.model, self.device = load.load(
            pretrained,
            revision or "main",
            gguf_file,
            dtype,
            choose(device, "hf model").used,
            trust_remote_code,
            tokenizer,
            add_bos_token,
            self.threads,
            placement,
            memo_gguf,
            args,
            lmeval_args.parse_backend(backend),
        )
        from evalflow.models.hf import torch_ops

        if mixed_precision_dtype is not None:  # lm-eval's autocast around every forward pass and generate
            torch_ops.autocast_forward(self.model, self.device, load.torch_dtype_of(mixed_precision_dtype))
        log.info("hf model: runs on %s (model.device=%s)", self.device, device)
        self._free_bytes: int | None = None
        self.paths, unproven = proven_paths(self.paths, self.device.type, force)
        if unproven:
            log.warning(unproven)
        self.paths, why = lmeval_args.fast_engine_fits(self.paths, lm_args)
        if why:
            log.warning(why)
        # fast.fast_engine.FastEngine, or None: the reference engine (fast/ is then never imported)
        self.fast: Any = None
        if self.paths != REFERENCE:
            from evalflow.models.hf.fast import fast_engine

            self.fast = fast_engine.start(self.model, self.device, self.paths, self.decode_slots_for)
            self.paths = self.fast.paths
        self._keep_only_needed = self.paths.logits_to_keep and torch_ops.accepts_logits_to_keep(self.model)
        self.max_length = int(max_length) if max_length else resolve_max_length(self.model.config, self.tokenizer)

    def describe(self) -> dict[str, Any]:
        """For the manifest: the device the model ran on (``model.device`` resolved here) and the
        engine that ran (``reference`` where the fast engine is not proven on that device)."""
        return {"device": str(self.device), "engine": "reference" if self.paths == REFERENCE else self.engine}

    @property
    def batching(self) -> str:
        """How greedy generation batches: ``continuous`` (the decode loop) or ``lmeval``."""
        return "continuous" if self.paths.continuous else "lmeval"

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        """What the response cache is keyed by, without loading the model or importing torch
        (``answer_key.answer_key``: what is in it and what is not, and why)."""
        return answer_key.answer_key(config)

    # -- tokenization (HFLM.tok_encode and friends) -------------------------------------------

    @property
    def prefix_token_id(self) -> int:
        """The token an empty context or a rolling text is conditioned on: ``model.prefix_token_id``,
        else BOS, else EOS."""
        return prefix_token(self.tokenizer, self.custom_prefix_token_id)

    def tok_encode(self, string: str, add_special_tokens: bool | None = None) -> list[int]:
        """HFLM.tok_encode: special tokens as the tokenizer / ``add_bos_token`` decide, no BOS twice."""
        return tok_encode(self.tokenizer, string, self.add_bos_token, self.prefix_token_id, add_special_tokens)

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
        from evalflow.models.hf import torch_ops

        if self._free_bytes is None:  # measured once, so batches do not vary with momentary load
            self._free_bytes = torch_ops.free_memory_bytes(self.device)
        on_cpu = getattr(self.device, "type", str(self.device)) == "cpu"
        cap = min(self.max_batch_size, CPU_PASS_ROWS) if on_cpu else self.max_batch_size
        return auto_batch_size(torch_ops.model_dims(self.model), seq_len, self._free_bytes, cap)

    def decode_slots_for(self, seq_len: int) -> int:
        """Rows of a continuous-batching decode step for rows of up to ``seq_len`` positions."""
        if self.fixed_batch_size is not None:
            return self.fixed_batch_size
        from evalflow.models.hf import torch_ops

        if self._free_bytes is None:
            self._free_bytes = torch_ops.free_memory_bytes(self.device)
        return auto_decode_slots(torch_ops.model_dims(self.model), seq_len, self._free_bytes, self.max_batch_size)

    def score_pairs(self, pairs: Sequence[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
        """(logprob, is_greedy) of each (context tokens, continuation tokens) pair, in input order."""
        from evalflow.models.hf import score

        return score.score_pairs(self._scoring_setup(), pairs)

    def _scoring_setup(self) -> Any:
        from evalflow.models.hf import score

        return score.ScoringSetup(
            self.model,
            self.device,
            self.max_length,
            self.batch_size_for,
            self._keep_only_needed,
            self.fast.scoring if self.fast is not None else None,
            self.logits_cache,
            load.torch_dtype_of(self.softmax_dtype) if self.softmax_dtype else None,
        )

    # -- the three request types --------------------------------------------------------------

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        """log P(continuation | context) and whether it is the greedy continuation, per request."""
        return self.score_pairs(self._pairs(requests))

    def _pairs(self, requests: Sequence[Request]) -> list[tuple[list[int], list[int]]]:
        """Each loglikelihood request's (context tokens, continuation tokens), as HFLM encodes them."""
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
        return pairs

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

    def generate_until(self, requests: Sequence[Request]) -> list[Generation]:
        """Generated text per request, cut at the first stop sequence (``until`` and EOS), and how
        it ended (:mod:`evalflow.models.hf.finish`)."""
        from evalflow.models.hf import generate

        return generate.generate_until(self._generation_setup(), requests)

    def answer_parts(self, rtype: str, chunks: Iterable[Sequence[Request]]) -> Iterator[tuple[int, dict[int, Any]]]:
        """``(n, {index: answer})`` for the ``n``-th chunk pulled, as each batch of it is answered
        (``evalflow.scale.dispatch.answered_parts``, which saves them as they come): log-likelihoods
        after each forward pass (``score.score_parts``); generation from one greedy decode loop
        kept running across chunks, each row as it stops (``stream``: the next chunk's requests
        take the rows the current one frees, rather than each chunk draining its batch to one
        row); rolling log-likelihoods (a text's windows summed) per chunk."""
        if rtype == "generate_until" and self.paths.continuous:
            yield from self.fast.generate_parts(self._generation_setup(), chunks)
            return
        from evalflow.models.hf import score

        for n, requests in enumerate(chunks):
            if rtype == "loglikelihood":
                for part in score.score_parts(self._scoring_setup(), self._pairs(requests)):
                    yield n, part
            else:
                yield n, dict(enumerate(getattr(self, rtype)(requests)))

    def _generation_setup(self) -> Any:
        from evalflow.models.hf import generate

        return generate.GenerationSetup(
            self.model,
            self.tokenizer,
            self.device,
            self.max_length,
            self.max_gen_toks,
            self.batch_size_for,
            self.tok_encode,
            self.encode_generation_context,
            self.fast.generation.answer_group if self.fast is not None else None,
        )
