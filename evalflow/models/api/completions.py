"""``openai_completions``: lm-eval 0.4.13's ``local-completions`` against ``/v1/completions``.

All three request types. Log-likelihoods come from ``echo=true`` + ``logprobs=1`` with one
generated token: the continuation's value is ``sum(token_logprobs[ctxlen:-1])`` and it is greedy
iff each of its tokens is the top entry of its ``top_logprobs`` (``payloads.score_choice``).
Requests are ordered as lm-eval orders them (longest token sequence first; generations grouped by
their generation kwargs, longest context first) and sent ``batch_size`` prompts per request.

Before the first log-likelihood request, the server's echoed log-probabilities are checked
(``alignment``); ``check_logprobs=false`` skips that.

Deviations from lm-eval, none changing an answer a correct server gives:
- the EOS text is a stop sequence with any ``num_concurrent`` (lm-eval drops it when concurrent);
- with ``apply_chat_template``, prompts are the tokenizer's chat template rendered as text whatever
  ``tokenized_requests`` is (lm-eval sends the raw message list as a completions prompt when
  ``tokenized_requests=false``, which servers reject).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from evalflow.core.records import Generation, Request
from evalflow.errors import ModelError
from evalflow.models.api import alignment, echo, payloads
from evalflow.models.api.served import OnAnswer, ServedModel, grouped_by_kwargs
from evalflow.models.api.tokenizers import client_tokenizer
from evalflow.models.api.tokens import ApiTokens, ScoreInput

PATH = "/completions"


@dataclass(frozen=True)
class Scored:
    """An echo answer already read down to its scores (``echo.scores``), one per prompt."""

    scores: list[tuple[float, bool]]


class OpenAICompletions(ServedModel):
    """A served model behind ``/v1/completions`` (vLLM, SGLang, TGI, llama.cpp, hosted APIs)."""

    KIND = "completions"

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        s = self.settings
        # lm-eval's tokenizer_backend=None: text prompts, generation only (no context length to score)
        self.tokens: ApiTokens | None = (
            None
            if s.tokenizer_backend == "none"
            else ApiTokens(
                client_tokenizer(s),
                max_length=s.max_length,
                add_bos_token=s.add_bos_token,
                prefix_token_id=s.custom_prefix_token_id,
                eos_string=s.eos_string,
            )
        )
        self.aligned = not s.check_logprobs
        self._aligning = threading.Lock()

    @classmethod
    def chat_template_source(cls, config: Mapping[str, Any]) -> dict[str, Any]:
        """Where ``apply_chat_template`` reads the template: the tokenizer folder or GGUF file."""
        name = str(config.get("tokenizer") or config.get("model") or "")
        path = Path(os.path.expanduser(name))
        if path.is_file():
            return {"pretrained": str(path.parent), "gguf_file": path.name}
        return {"pretrained": name}

    def check_alignment(self) -> None:
        """Refuse a server whose echoed log-probabilities are misplaced (each server once per model
        object; chunks answered in several threads wait for the one check)."""
        if self.aligned:
            return
        with self._aligning:
            if self.aligned:
                return
            alignment.check_every_server(self.client, self.settings.model, self.settings.seed, PATH)
            self.aligned = True

    def _tokens(self) -> ApiTokens:
        """The client tokenizer, or lm-eval's refusal when there is none (tokenizer_backend=none)."""
        if self.tokens is None:
            raise ModelError(
                "Tokenizer is required for loglikelihood tasks to compute context lengths. "
                "model.tokenizer_backend=none (lm-eval's None) sends text and can only generate; name a "
                "tokenizer (tokenizer_backend=huggingface with model.tokenizer, tiktoken, or remote)."
            )
        return self.tokens

    def _prompt(self, tokens: Sequence[int]) -> Any:
        return list(tokens) if self.settings.tokenized_requests else self._tokens().decode(tokens)

    def _score(self, inputs: Sequence[ScoreInput], on_score: OnAnswer) -> None:
        """Echo-score ``inputs``, longest first, ``batch_size`` prompts per request."""
        self.check_alignment()
        s = self.settings
        order = sorted(range(len(inputs)), key=lambda i: (-len(inputs[i].tokens), inputs[i].tokens))
        batches = [order[k : k + s.batch_size] for k in range(0, len(order), s.batch_size)]
        bodies = [
            payloads.loglikelihood_payload(
                s.model,
                payloads.batch_prompts([self._prompt(inputs[i].tokens) for i in b], s.tokenized_requests),
                seed=s.seed,
            )
            for b in batches
        ]

        def read(j: int, body: bytes) -> Any:
            """Only the continuations' entries parsed (``echo``), else the whole answer."""
            got = echo.scores(body, [inputs[i].ctxlen for i in batches[j]])
            return Scored(got) if got is not None else orjson.loads(body)

        def arrived(j: int, answer: Any) -> None:
            batch = batches[j]
            if isinstance(answer, Scored):
                for i, score in zip(batch, answer.scores):
                    on_score(i, score)
                return
            for i, choice in zip(batch, payloads.choices(answer, len(batch), s.root_url)):
                on_score(i, payloads.score_choice(choice, inputs[i].ctxlen))

        self.client.post_all(PATH, bodies, arrived, read)

    def _loglikelihood(self, requests: Sequence[Request], on_answer: OnAnswer) -> None:
        self._score(self._tokens().score_inputs([(r.args[0], r.args[1]) for r in requests], requests), on_answer)

    def _loglikelihood_rolling(self, requests: Sequence[Request], on_answer: OnAnswer) -> None:
        """Each text's disjoint windows scored as log-likelihood prompts; a text is answered (its
        windows' sum) when its last window arrives."""
        windows: list[ScoreInput] = []
        owner: list[int] = []
        for i, r in enumerate(requests):
            for w in self._tokens().rolling_inputs(r.args[0]):
                windows.append(w)
                owner.append(i)
        left = [owner.count(i) for i in range(len(requests))]
        total = [0.0] * len(requests)

        def window_scored(k: int, score: tuple[float, bool]) -> None:
            i = owner[k]
            total[i] += score[0]
            left[i] -= 1
            if left[i] == 0:
                on_answer(i, total[i])

        for i in range(len(requests)):
            if left[i] == 0:  # an empty text has no tokens to score
                on_answer(i, 0.0)
        self._score(windows, window_scored)

    def _generate_until(self, requests: Sequence[Request], on_answer: OnAnswer) -> None:
        s = self.settings
        for group in grouped_by_kwargs(requests):
            gen_kwargs = payloads.plain(requests[group[0]].args[1] or {})
            max_gen_toks = gen_kwargs.get("max_gen_toks", s.max_gen_toks)
            prompts = {
                i: self._tokens().generation_prompt(requests[i].args[0], max_gen_toks)
                if s.tokenized_requests
                else requests[i].args[0]
                for i in group
            }
            batches = [group[k : k + s.batch_size] for k in range(0, len(group), s.batch_size)]
            bodies = [
                payloads.completion_payload(
                    s.model,
                    payloads.batch_prompts([prompts[i] for i in b], s.tokenized_requests),
                    gen_kwargs,
                    max_gen_toks=s.max_gen_toks,
                    seed=s.seed,
                    eos=self.tokens.eos_string if self.tokens else s.eos_string,
                )
                for b in batches
            ]

            def arrived(j: int, answer: Any, batches: list[list[int]] = batches) -> None:
                batch = batches[j]
                for i, choice in zip(batch, payloads.choices(answer, len(batch), s.root_url)):
                    on_answer(i, Generation(payloads.completion_text(choice), payloads.finish(answer, choice)))

            self.client.post_all(PATH, bodies, arrived)
