"""The request/response contracts (``model.dialect``) a served model speaks, each lm-eval 0.4.13's
for one of its API model types, declared in one table rather than as special cases in the models:

- ``openai`` (``local-completions``, ``local-chat-completions``): ``payloads``' bodies, the key as
  ``Authorization: Bearer``;
- ``openai_hosted`` (``openai-chat-completions``): ``max_completion_tokens``, the default stop
  ``<|endoftext|>``, and for reasoning models (``o1``, ``o3``, ``o4``, ``5`` in the name) no stop
  and temperature 1, as ``OpenAIChatCompletion._create_payload``;
- ``azure`` (``azure-openai-chat-completions``): the hosted body, posted to
  ``ENDPOINT/openai/deployments/MODEL/chat/completions?api-version=V``; no model listing;
- ``anthropic`` (``anthropic-chat-completions``): the Messages API: ``x-api-key`` and
  ``anthropic-version`` headers, the system message as the ``system`` field, content blocks,
  ``stop_sequences`` (blank ones dropped), ``max_tokens``, the answer in ``content[].text``;
- ``gguf`` (lm-eval's ``gguf`` client of a llama.cpp server): text prompts scored by the echoed
  ``text_offset`` (``evalflow.models.api.gguf_server``).

Each chat contract takes one of the run's reasoning settings (``reasoning_key``): OpenAI's three the
``reasoning_effort`` body field, Anthropic's ``thinking_budget`` as ``thinking: {type: enabled,
budget_tokens}`` (with temperature 1, the API's condition); the other setting is refused before any
request. Each answer is a :class:`~evalflow.core.records.Generation`: the text lm-eval scores, why
the generation stopped, its ``usage`` and the reasoning the server split off.

Which headers carry the key is part of the contract; the key itself is read from the environment
at request time (``api_key_env``), and lm-eval's ``header`` (``headers_env``) replaces it.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from evalflow.core.records import Finish, Generation
from evalflow.errors import ConfigError, ModelError
from evalflow.models.api import payloads
from evalflow.models.lmeval_tokens import stop_sequences

ANTHROPIC_VERSION = "2023-06-01"  # lm-eval 0.4.13's AnthropicChat.anthropic_version
REASONING_MARKS = ("o1", "5", "o3", "o4")  # OpenAIChatCompletion: no stop, temperature 1


@dataclass(frozen=True)
class Dialect:
    """One contract: which model kinds speak it, the key's headers, where chat bodies go and how
    they are built and read, whether the server lists its models at ``/models``, and which run
    setting says how hard a reasoning model thinks (``reasoning_key``; None: neither)."""

    kinds: tuple[str, ...]
    key_headers: Callable[[str | None], dict[str, str]]
    chat_body: Callable[..., dict[str, Any]] | None = None
    chat_answer: Callable[[Any, str, str | None], Generation] | None = None
    lists_models: bool = True
    reasoning_key: str | None = None


def _bearer(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def _anthropic_key(key: str | None) -> dict[str, str]:
    return {**({"x-api-key": key} if key else {}), "anthropic-version": ANTHROPIC_VERSION}


def openai_chat_body(
    model: str, messages: list[dict[str, Any]], gen_kwargs: Any, *, reasoning: str | None = None, **kw: Any
) -> dict[str, Any]:
    """``LocalChatCompletion._create_payload``, and ``reasoning_effort`` last when the run sets it."""
    return _with_effort(payloads.chat_payload(model, messages, gen_kwargs, **kw), reasoning)


def _with_effort(body: dict[str, Any], effort: str | None) -> dict[str, Any]:
    """The body with OpenAI's ``reasoning_effort`` field (the run's, over a task's gen_kwargs');
    unchanged when the run sets none, so its bytes stay lm-eval's."""
    return body if effort is None else {**body, "reasoning_effort": effort}


def hosted_chat_body(
    model: str,
    messages: list[dict[str, Any]],
    gen_kwargs: Any,
    *,
    max_gen_toks: int,
    seed: int,
    eos: str | None,
    reasoning: str | None = None,
) -> dict[str, Any]:
    """``OpenAIChatCompletion._create_payload``, and ``reasoning_effort`` when the run sets it."""
    kwargs = copy.deepcopy(payloads.plain(dict(gen_kwargs or {})))
    kwargs.pop("do_sample", False)
    max_tokens = kwargs.pop("max_tokens") if "max_tokens" in kwargs else kwargs.pop("max_gen_toks", max_gen_toks)
    temperature = kwargs.pop("temperature", 0)
    stop = stop_sequences(kwargs.pop("until", ["<|endoftext|>"]), eos)
    body = {
        "messages": messages,
        "model": model,
        "max_completion_tokens": max_tokens,
        "temperature": temperature,
        "stop": stop[:4],
        "seed": seed,
        **kwargs,
    }
    if any(mark in model for mark in REASONING_MARKS):
        body.pop("stop")
        body["temperature"] = 1
    return _with_effort(body, reasoning)


def anthropic_body(
    model: str,
    messages: list[dict[str, Any]],
    gen_kwargs: Any,
    *,
    max_gen_toks: int,
    seed: int,
    eos: str | None,
    reasoning: int | None = None,
) -> dict[str, Any]:
    """``AnthropicChat._create_payload`` (no seed: the Messages API has none); with the run's
    ``thinking_budget``, extended thinking (see :func:`_with_thinking`)."""
    system = messages[0].get("content") if messages and messages[0].get("role") == "system" else None
    turns = messages[1:] if system else messages
    cleaned = [
        {"role": m["role"], "content": [{"type": m.get("type", "text"), m.get("type", "text"): m["content"]}]}
        for m in turns
    ]
    kwargs = copy.deepcopy(payloads.plain(dict(gen_kwargs or {})))
    kwargs.pop("do_sample", False)
    max_tokens = kwargs.pop("max_gen_toks", max_gen_toks)
    temperature = kwargs.pop("temperature", 0)
    stop = [s for s in stop_sequences(kwargs.pop("until", ["\n\nHuman:"]), eos) if s and s.strip()]
    body = {
        "messages": cleaned,
        "model": model,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stop_sequences": stop or [eos or "\n\nHuman:"],  # lm-eval: [eos], its default eos
        **kwargs,
    }
    if system:
        body["system"] = system
    return body if reasoning is None else _with_thinking(body, reasoning)


def _with_thinking(body: dict[str, Any], budget: int) -> dict[str, Any]:
    """Anthropic's extended thinking: ``thinking: {type: enabled, budget_tokens}``, at temperature
    1 (the API refuses another with thinking on). The budget counts within ``max_tokens``, so a
    budget the request's ``max_tokens`` cannot hold is refused here, before the request is sent."""
    if budget >= body["max_tokens"]:
        raise ConfigError(
            f"thinking_budget={budget} is not below this request's max_tokens={body['max_tokens']} (the task's "
            "max_gen_toks, or model.max_gen_toks): Anthropic counts the thinking within max_tokens, so no answer "
            f"would fit. Raise max_gen_toks (gen_kwargs=max_gen_toks={budget + 1024}) or lower thinking_budget."
        )
    return {**body, "temperature": 1, "thinking": {"type": "enabled", "budget_tokens": budget}}


def openai_chat_answer(answer: Any, url: str, think_end_token: str | None) -> Generation:
    """``LocalChatCompletion.parse_generations``: ``message.content``, after ``think_end_token``;
    the reasoning is what the server split off (``reasoning_content``), else the content's part up
    to the marker that lm-eval drops."""
    (choice,) = payloads.choices(answer, 1, url)
    text = payloads.chat_text(choice)
    thinking = None
    if think_end_token and think_end_token in text:
        thinking = text[: text.rindex(think_end_token)]
        text = text.split(think_end_token)[-1].lstrip()
    served = payloads.chat_reasoning(choice)
    finish = payloads.finish(answer, choice, served if served is not None else thinking)
    if think_end_token and served is None:  # the model's own marker: whether the thinking closed
        finish = dataclasses.replace(finish, thinking_closed=thinking is not None)
    return Generation(text, finish)


ANTHROPIC_STOPS = {"end_turn": "eos", "stop_sequence": "stop", "max_tokens": "length", "refusal": "error"}


def anthropic_answer(answer: Any, url: str, think_end_token: str | None) -> Generation:
    """``AnthropicChat.parse_generations``: the text of the answer's first content block; the
    ``thinking`` blocks' text as the reasoning, ``stop_reason`` and ``usage`` as its finish."""
    blocks = answer.get("content") if isinstance(answer, Mapping) else None
    if not isinstance(blocks, list):
        raise ModelError(f"the server at {url} answered {str(answer)[:300]} where a Messages API answer was expected.")
    texts = [str(b["text"]) for b in blocks if isinstance(b, Mapping) and isinstance(b.get("text"), str)]
    thoughts = [str(b["thinking"]) for b in blocks if isinstance(b, Mapping) and isinstance(b.get("thinking"), str)]
    usage = answer.get("usage") if isinstance(answer.get("usage"), Mapping) else {}
    finish = Finish(
        ANTHROPIC_STOPS.get(str(answer.get("stop_reason"))),
        payloads.token_count(usage.get("input_tokens")),
        payloads.token_count(usage.get("output_tokens")),  # the thinking's included; the API gives no separate count
        None,
        "".join(thoughts) if thoughts else None,
    )
    return Generation(texts[0] if texts else "", finish)


EFFORT = "reasoning_effort"
DIALECTS: dict[str, Dialect] = {
    "openai": Dialect(("completions", "chat"), _bearer, openai_chat_body, openai_chat_answer, True, EFFORT),
    "openai_hosted": Dialect(("chat",), _bearer, hosted_chat_body, openai_chat_answer, True, EFFORT),
    "azure": Dialect(("chat",), _bearer, hosted_chat_body, openai_chat_answer, False, EFFORT),
    "anthropic": Dialect(("chat",), _anthropic_key, anthropic_body, anthropic_answer, True, "thinking_budget"),
    "gguf": Dialect(("completions",), _bearer, lists_models=False),
}


def check_dialect(kind: str, name: str) -> None:
    """A ConfigError naming the dialects of this model kind, for one it does not speak."""
    if name not in DIALECTS or kind not in DIALECTS[name].kinds:
        speaks = ", ".join(d for d, spec in DIALECTS.items() if kind in spec.kinds)
        raise ConfigError(
            f"model.dialect={name!r} is not a contract of the openai_{kind} model; it speaks {speaks} "
            "(see docs/served-models.md)."
        )


def chat_path(settings: Any) -> str:
    """Where a chat body goes, after the root URL."""
    if settings.dialect == "azure":
        version = settings.api_version or "2025-03-01-preview"  # lm-eval's default api_version
        return f"/openai/deployments/{settings.model}/chat/completions?api-version={version}"
    if settings.dialect == "anthropic":
        return "/messages"
    return "/chat/completions"


def request_headers(settings: Any) -> dict[str, str]:
    """Content type, ``model.headers``, and the key's headers of the dialect; lm-eval's ``header``
    (``headers_env``) replaces the key headers, as it replaces lm-eval's ``Authorization``."""
    headers = {"Content-Type": "application/json", **settings.headers}
    secret = settings.secret_headers()
    if secret:
        return {**headers, **secret}
    return {**headers, **DIALECTS[settings.dialect].key_headers(settings.api_key())}
