"""``openai_chat``: lm-eval 0.4.13's ``local-chat-completions`` against ``/v1/chat/completions``.

Generation only. Prompts must be chat messages: run with ``apply_chat_template=true``, and the
few-shot stage sends the messages (system instruction, few-shot turns, the question) as JSON, as
lm-eval's ``JsonChatStr`` does; the server applies its own chat template. One conversation per
request (lm-eval forces ``batch_size=1`` for chat), at most four stop sequences, no client-side
tokenizer (so no EOS stop unless ``eos_string`` or a ``tokenizer_backend`` gives one, and no
truncation: the server decides). ``model.dialect`` picks the contract (OpenAI's, OpenAI's hosted
API, Azure's, Anthropic's Messages API: ``evalflow.models.api.dialects``). A task with ``doc_to_image``
sends its images as lm-eval does: base64 PNG ``image_url`` parts before the last message's text
(``max_images``, default 1 as in lm-eval), for vLLM/SGLang-served VLMs.

Reasoning models: the scored text is the answer's ``content`` (lm-eval reads nothing else); what the
server split off (``reasoning_content``) is kept as the generation's reasoning, its tokens counted
from ``usage``. The task's stop sequences go to the server as lm-eval sends them, thinking or not
(lm-eval's chat models cut nothing client-side): a server that applies them to the reasoning too may
end a generation inside it. The run's ``reasoning_effort`` (or Anthropic's ``thinking_budget``) is
sent in each body (``dialects``) and keys the answers (``REASONING``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from evalflow.core.records import Request
from evalflow.errors import ConfigError, ModelError
from evalflow.models.api import payloads
from evalflow.models.api.dialects import DIALECTS, chat_path
from evalflow.models.api.served import OnAnswer, ServedModel, grouped_by_kwargs

REFUSAL = (
    "Loglikelihood is not supported for chat completions. Consider using the completions API instead "
    "(model=openai_completions): a chat endpoint returns no log-probabilities of given text, so the "
    "{rtype} requests of this task cannot be answered."
)


class OpenAIChat(ServedModel):
    """A served chat model behind ``/v1/chat/completions``."""

    KIND = "chat"
    CHAT_MESSAGES: ClassVar[bool] = True  # prompts are sent as message lists, not rendered text
    MULTIMODAL: ClassVar[tuple[str, ...]] = ("generate_until",)  # images as base64 PNG image_url parts
    REASONING: ClassVar[bool] = True  # the run's reasoning_effort / thinking_budget go in its config

    def _loglikelihood(self, requests: Sequence[Request], on_answer: OnAnswer) -> None:
        raise ModelError(REFUSAL.format(rtype="loglikelihood"))

    def _loglikelihood_rolling(self, requests: Sequence[Request], on_answer: OnAnswer) -> None:
        raise ModelError(REFUSAL.format(rtype="loglikelihood_rolling"))

    def _generate_until(self, requests: Sequence[Request], on_answer: OnAnswer) -> None:
        s = self.settings
        dialect = DIALECTS[s.dialect]
        assert dialect.chat_body is not None and dialect.chat_answer is not None
        path, eos = chat_path(s), self.eos
        for group in grouped_by_kwargs(requests):
            gen_kwargs = payloads.plain(requests[group[0]].args[1] or {})
            bodies = [
                dialect.chat_body(
                    s.model,
                    with_images(messages(requests[i].args[0]), requests[i], s.max_images),
                    gen_kwargs,
                    max_gen_toks=s.max_gen_toks,
                    seed=s.seed,
                    eos=eos,
                    reasoning=getattr(s, dialect.reasoning_key) if dialect.reasoning_key else None,
                )
                for i in group
            ]

            def arrived(j: int, answer: Any, group: list[int] = group) -> None:
                on_answer(group[j], dialect.chat_answer(answer, s.root_url, s.think_end_token))  # type: ignore[misc]

            self.client.post_all(path, bodies, arrived)

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.eos = self._eos_string()

    def _eos_string(self) -> str | None:
        """lm-eval's ``eos_string``: the one given, else the tokenizer's EOS text when a tokenizer
        backend is named (a stop sequence then), else none (lm-eval's chat default)."""
        s = self.settings
        if s.eos_string or s.tokenizer_backend == "none":
            return s.eos_string
        from evalflow.models.api.tokenizers import client_tokenizer

        return str(client_tokenizer(s).eos_token)


def messages(context: Any) -> list[dict[str, Any]]:
    """The JSON message list the few-shot stage wrote, or a ConfigError if prompts are plain text."""
    try:
        value = json.loads(context) if isinstance(context, str) else None
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(m, dict) for m in value):
        raise ConfigError(
            "model=openai_chat sends chat messages, but this prompt is plain text: run with "
            "apply_chat_template=true (lm-eval's local-chat-completions needs --apply_chat_template too)."
        )
    return value


def with_images(chat: list[dict[str, Any]], request: Request, max_images: int) -> list[dict[str, Any]]:
    """lm-eval's ``create_image_prompt``: the request's first ``max_images`` images, each a base64
    PNG ``image_url`` part (``detail: auto``), put before the last message's text, which keeps its
    ``<image>`` placeholders; a text request's messages unchanged."""
    if len(request.args) < 3:
        return chat
    parts = [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png_base64(img)}", "detail": "auto"}}
        for img in request.args[2]["visual"][:max_images]
    ]
    last = dict(chat[-1])
    content = last["content"]
    last["content"] = parts + (list(content) if isinstance(content, list) else [{"type": "text", "text": content}])
    last.pop("type", None)
    return chat[:-1] + [last]


def png_base64(image: Any) -> str:
    """The image as lm-eval encodes it: Pillow's PNG, base64."""
    import base64
    import io

    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode("utf-8")
