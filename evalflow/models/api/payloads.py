"""Request bodies and response parsing of lm-eval 0.4.13's ``local-completions`` and
``local-chat-completions`` (``lm_eval/models/openai_completions.py``), as pure functions.

The bodies are byte-for-byte lm-eval's (same keys and values), so a server answers evalflow what it
answers lm-eval; ``tests/models/api/test_payloads.py`` pins them and the parity benchmark compares
them on the wire.

>>> loglikelihood_payload("m", "2+2= 4", seed=1234)["echo"]
True
>>> score_choice({"logprobs": {"token_logprobs": [None, -1.0, -0.5, -2.0],
...     "top_logprobs": [None, {"a": -1.0}, {"b": -0.1, "c": -0.5}, {"d": -2.0}]}}, ctxlen=2)
(-0.5, False)
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

from evalflow.core.records import Finish
from evalflow.errors import ModelError
from evalflow.models.lmeval_tokens import stop_sequences  # lm-eval's handle_stop_sequences


def plain(value: Any) -> Any:
    """Records keep lists as tuples; request bodies need JSON lists (as lm-eval's YAML gives them)."""
    return json.loads(json.dumps(value))


def loglikelihood_payload(model: str, prompt: Any, *, seed: int) -> dict[str, Any]:
    """Score a prompt: echo it with its log-probabilities and one generated token."""
    return {
        "model": model,
        "prompt": prompt,
        "temperature": 0,
        "max_tokens": 1,
        "logprobs": 1,
        "seed": seed,
        "echo": True,
    }


def _generation_fields(gen_kwargs: Mapping[str, Any] | None, max_gen_toks: int, eos: str | None) -> dict[str, Any]:
    kwargs = copy.deepcopy(plain(dict(gen_kwargs or {})))
    kwargs.pop("do_sample", False)
    max_tokens = kwargs.pop("max_tokens") if "max_tokens" in kwargs else kwargs.pop("max_gen_toks", max_gen_toks)
    temperature = kwargs.pop("temperature", 0)
    # the EOS text is appended whatever num_concurrent is: lm-eval passes it only on its one-at-a-time
    # path (its concurrent amodel_call leaves it out, so a generation ending in EOS runs on to
    # max_gen_toks there); an answer must not depend on how many requests are in flight
    stop = stop_sequences(kwargs.pop("until", None), eos)
    return {"max_tokens": max_tokens, "temperature": temperature, "stop": stop, "rest": kwargs}


def completion_payload(
    model: str, prompt: Any, gen_kwargs: Mapping[str, Any] | None, *, max_gen_toks: int, seed: int, eos: str | None
) -> dict[str, Any]:
    """A generation request to ``/v1/completions``; other generation kwargs pass through."""
    f = _generation_fields(gen_kwargs, max_gen_toks, eos)
    return {
        "prompt": prompt,
        "model": model,
        "max_tokens": f["max_tokens"],
        "temperature": f["temperature"],
        "stop": f["stop"],
        "seed": seed,
        **f["rest"],
    }


def chat_payload(
    model: str,
    messages: list[dict[str, Any]],
    gen_kwargs: Mapping[str, Any] | None,
    *,
    max_gen_toks: int,
    seed: int,
    eos: str | None = None,
) -> dict[str, Any]:
    """A generation request to ``/v1/chat/completions``: at most 4 stop sequences (OpenAI's limit,
    lm-eval's cut); the EOS text only when ``eos_string`` or a tokenizer backend gives one (lm-eval's
    chat model has no tokenizer by default)."""
    f = _generation_fields(gen_kwargs, max_gen_toks, eos)
    return {
        "messages": messages,
        "model": model,
        "max_tokens": f["max_tokens"],
        "temperature": f["temperature"],
        "stop": f["stop"][:4],
        "seed": seed,
        **f["rest"],
    }


def choices(response: Any, expected: int, url: str) -> list[dict[str, Any]]:
    """The response's choices in prompt order, or a ModelError saying what the server sent."""
    got = response.get("choices") if isinstance(response, Mapping) else None
    if not isinstance(got, list) or len(got) != expected:
        raise ModelError(
            f"the server at {url} answered {json.dumps(response)[:300]} where {expected} choice(s) were "
            "expected; is it an OpenAI-compatible endpoint?"
        )
    return sorted(got, key=itemgetter("index"))


def score_choice(choice: Mapping[str, Any], ctxlen: int) -> tuple[float, bool]:
    """lm-eval's ``parse_logprobs`` for one prompt: the sum of ``token_logprobs[ctxlen:-1]`` (the
    continuation's tokens; the last entry is the generated token), greedy iff each of those tokens
    is the top entry of its ``top_logprobs``."""
    if ctxlen <= 0:
        raise ModelError("a loglikelihood request has an empty context after tokenization; lm-eval refuses it too.")
    logprobs = choice.get("logprobs") or {}
    tokens = logprobs.get("token_logprobs")
    tops = logprobs.get("top_logprobs")
    if not isinstance(tokens, list) or not isinstance(tops, list):
        raise ModelError(
            f"the server's answer has no echoed token_logprobs/top_logprobs ({json.dumps(choice)[:300]}); "
            "the endpoint must support echo=true with logprobs (vLLM, SGLang and llama.cpp's /v1/completions do)."
        )
    scored, top = tokens[ctxlen:-1], tops[ctxlen:-1]
    is_greedy = True
    for tok, best in zip(scored, top):
        if tok != max(best.values()):
            is_greedy = False
            break
    return float(sum(scored)), is_greedy


def completion_text(choice: Mapping[str, Any]) -> str:
    """``text`` of a completion choice; null (e.g. a content filter) becomes "" as in lm-eval."""
    text = choice.get("text")
    return text if isinstance(text, str) else ""


def chat_text(choice: Mapping[str, Any]) -> str:
    """``message.content`` of a chat choice; null or missing becomes "" as in lm-eval."""
    message = choice.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    return content if isinstance(content, str) else ""


def chat_reasoning(choice: Mapping[str, Any]) -> str | None:
    """The reasoning a server split off a chat answer: ``message.reasoning_content`` (vLLM's and
    SGLang's reasoning parsers, llama.cpp's ``--reasoning-format``) or ``message.reasoning`` (later
    vLLM, OpenRouter); None when the server split none off (the scored text is ``content`` either way,
    as lm-eval reads only ``content``)."""
    message = choice.get("message")
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key) if isinstance(message, Mapping) else None
        if isinstance(value, str):
            return value
    return None


def stop_reason(choice: Mapping[str, Any]) -> str | None:
    """Why an OpenAI-style choice ended, as ``Finish.stop_reason``. ``length``: ``max_tokens``;
    ``content_filter``: an error. ``stop`` is OpenAI's "a natural stop point or a stop sequence":
    where the server tells them apart it is read from what it says (vLLM's ``stop_reason``: the
    matched stop string, a stop token id or null at EOS; llama.cpp's ``stop_type``: eos, word,
    limit); a server that does not (llama-cpp-python, OpenAI's API) reads as ``stop``. Anything
    else (tool calls, a missing reason): not reported."""
    reason = choice.get("finish_reason")
    if reason == "stop":
        if "stop_reason" in choice:  # vLLM: the stop string, a stop token's id (the model's own end) or null (EOS)
            return "stop" if isinstance(choice["stop_reason"], str) else "eos"
        return {"eos": "eos", "word": "stop", "limit": "length"}.get(str(choice.get("stop_type")), "stop")
    return {"length": "length", "content_filter": "error"}.get(str(reason))


def finish(answer: Any, choice: Mapping[str, Any], reasoning: str | None = None) -> Finish:
    """The :class:`Finish` of one choice: its stop reason, and the answer's ``usage`` when the
    answer holds that one choice (a batched completions answer sums ``usage`` over its prompts, which
    cannot be split among them); ``reasoning``: what the server or ``think_end_token`` split off."""
    usage = answer.get("usage") if isinstance(answer, Mapping) and len(answer.get("choices") or ()) == 1 else None
    usage = usage if isinstance(usage, Mapping) else {}
    details = usage.get("completion_tokens_details")
    return Finish(
        stop_reason(choice),
        token_count(usage.get("prompt_tokens")),
        token_count(usage.get("completion_tokens")),
        token_count(details.get("reasoning_tokens")) if isinstance(details, Mapping) else None,
        reasoning,
    )


def token_count(value: Any) -> int | None:
    """A ``usage`` count, or None when the server gave none (or not a number)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def batch_prompts(prompts: Sequence[Any], tokenized: bool) -> Any:
    """lm-eval's ``create_message``: token-id prompts always as a list of lists; text prompts alone
    when there is one, else as a list."""
    if tokenized or len(prompts) > 1:
        return [list(p) if tokenized else p for p in prompts]
    return prompts[0]
