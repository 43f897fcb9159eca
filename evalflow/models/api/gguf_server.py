"""``gguf_server``: lm-eval 0.4.13's ``gguf`` model (``lm_eval/models/gguf.py``), its client of a
llama.cpp server, as a served model: the same requests, read the same way.

lm-eval's ``gguf`` has no client-side tokenizer. A log-likelihood request sends the text
``context + continuation`` with ``echo``, ``logprobs=10`` and one generated token; the
continuation's tokens are those whose echoed ``text_offset`` lies at or after the context's
length in characters, and it is greedy iff each of them (and the generated one) is its position's
top entry. A generation sends the context with the task's ``until`` (``["</s>"]`` when it has
none) and no ``max_tokens`` (the server's default length applies: 16 tokens on
llama-cpp-python), and strips the answer. ``base_url`` is the server's root (lm-eval posts to
``BASE/v1/completions``). Rolling log-likelihoods are refused, as lm-eval refuses them.

One difference, which no correct server shows: before the first log-likelihood request the
server's echoed log-probabilities are checked (``alignment``; ``check_logprobs=false`` skips it),
so a stock llama-cpp-python server whose echo is shifted by one token is refused rather than
scored wrongly.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from evalflow.core.records import Generation, Request
from evalflow.errors import ModelError
from evalflow.models.api import alignment, payloads
from evalflow.models.api.served import OnAnswer, ServedModel

PATH = "/v1/completions"
LOGPROBS = 10  # lm-eval's GGUFLM.logprobs


def loglikelihood_body(context: str, continuation: str) -> dict[str, Any]:
    """``GGUFLM.gguf_completion(context, continuation)``, key order included."""
    body: dict[str, Any] = {"prompt": context, "logprobs": LOGPROBS, "temperature": 0.0}
    if continuation:
        body.update({"prompt": context + continuation, "max_tokens": 1, "echo": True})
    return body


def generation_body(context: str, gen_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """``GGUFLM.gguf_completion(context, stop=until)``: only ``until`` is read from the kwargs."""
    until = payloads.plain(dict(gen_kwargs or {})).get("until", ["</s>"])
    body: dict[str, Any] = {"prompt": context, "logprobs": LOGPROBS, "temperature": 0.0}
    if until is not None:
        body["stop"] = until
    return body


def offset_score(logprobs: Mapping[str, Any], context_length: int) -> tuple[float, bool]:
    """lm-eval's ``get_result``: the continuation starts at the first token whose ``text_offset``
    is at or after ``context_length``; its value is the sum of ``token_logprobs`` from there to the
    generated token (left out); greedy iff every token from there on is its position's top one."""
    offsets, tokens, values = logprobs["text_offset"], logprobs["tokens"], logprobs["token_logprobs"]
    start = next((i for i, offset in enumerate(offsets) if offset >= context_length), len(offsets))
    greedy = all(
        max(logprobs["top_logprobs"][i], key=logprobs["top_logprobs"][i].get) == tokens[i]
        for i in range(start, len(tokens))
    )
    return float(sum(values[start:-1])), greedy


def _first_choice(answer: Any, url: str) -> Mapping[str, Any]:
    choices = answer.get("choices") if isinstance(answer, Mapping) else None
    if not choices:
        raise ModelError(f"the server at {url} answered {str(answer)[:300]} where a completion was expected.")
    return choices[0]


class GgufServer(ServedModel):
    """A llama.cpp server, spoken to as lm-eval's ``gguf`` model speaks to it."""

    KIND = "completions"

    def __init__(self, **config: Any) -> None:
        super().__init__(**{"dialect": "gguf", **config})
        self.aligned = not self.settings.check_logprobs
        self._aligning = threading.Lock()

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        return super().identity(**{"dialect": "gguf", **config})

    def _check_alignment(self) -> None:
        """The echo check of ``openai_completions`` (``alignment``), once per model object."""
        with self._aligning:
            if self.aligned:
                return
            alignment.check_every_server(self.client, self.settings.model, self.settings.seed, PATH)
            self.aligned = True

    def _loglikelihood(self, requests: Sequence[Request], on_answer: OnAnswer) -> None:
        self._check_alignment()
        pairs = [(str(r.args[0]), str(r.args[1])) for r in requests]
        url = self.settings.root_url

        def arrived(i: int, answer: Any) -> None:
            logprobs = _first_choice(answer, url).get("logprobs")
            if not logprobs or not logprobs.get("token_logprobs"):
                raise ModelError(
                    f"the server at {url} answered without echoed token_logprobs ({str(answer)[:300]}); "
                    "lm-eval's gguf model needs a llama.cpp server's /v1/completions with echo and logprobs."
                )
            on_answer(i, offset_score(logprobs, len(pairs[i][0])))

        self.client.post_all(PATH, [loglikelihood_body(c, x) for c, x in pairs], arrived)

    def _loglikelihood_rolling(self, requests: Sequence[Request], on_answer: OnAnswer) -> None:
        raise ModelError(
            "loglikelihood_rolling not yet supported for GGUF models (lm-eval 0.4.13's gguf model refuses "
            "it too): serve the model and use --model local-completions with its tokenizer "
            "(tokenizer_backend=huggingface,tokenizer=...), which scores rolling windows."
        )

    def _generate_until(self, requests: Sequence[Request], on_answer: OnAnswer) -> None:
        url = self.settings.root_url

        def arrived(i: int, answer: Any) -> None:
            choice = _first_choice(answer, url)
            text = choice.get("text")
            if not isinstance(text, str):
                raise ModelError(f"the server at {url} answered {str(answer)[:300]} without a generated text.")
            on_answer(i, Generation(text.strip(), payloads.finish(answer, choice)))

        bodies = [generation_body(str(r.args[0]), r.args[1]) for r in requests]
        self.client.post_all(PATH, bodies, arrived)
