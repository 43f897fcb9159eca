"""A loopback ``/v1/completions`` server that scores and generates from token ids alone, with vLLM's
tokenizer endpoints (``/tokenizer_info``, ``/tokenize``, ``/detokenize``) on request, recording
every request, so that evalflow's served client and lm-eval's ``LocalCompletionsAPI`` can be
pointed at the same server and their requests and answers compared.

    with TokenizerServer("m", tokenizer_endpoints=True) as srv:  # srv.url -> http://127.0.0.1:PORT/v1
        ...
    srv.posts                       # (path, body) of every POST, in arrival order

Its tokenizer (:func:`encode`) is bytes shifted by 3 with ``<s>`` = 1 and ``</s>`` = 2 as special
tokens; a text prompt is tokenized with it. An echo request gets, per prompt token after the
first, ``logprob(token, position)`` and a ``top_logprobs`` entry that makes the token greedy
unless ``token % 3 == 0``; a generation gets ``" answer N"`` with N from the prompt's tokens.
``tokenizer_info`` replaces ``/tokenizer_info``'s answer (lm-eval's auto-detection needs
``eos_token`` in it).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.support.loopback_json import JsonHandler, LoopbackJsonServer

SPECIAL = {"<s>": 1, "</s>": 2}
_SPECIAL_RE = re.compile("(" + "|".join(map(re.escape, SPECIAL)) + ")")
INFO = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": None, "chat_template": None}


def encode(text: str) -> list[int]:
    """The server's tokenizer: special tokens by name, every other byte shifted by 3."""
    out: list[int] = []
    for part in _SPECIAL_RE.split(text):
        out += [SPECIAL[part]] if part in SPECIAL else [b + 3 for b in part.encode()]
    return out


def decode(tokens: list[int]) -> str:
    names = {v: k.encode() for k, v in SPECIAL.items()}
    return b"".join(names[t] if t in names else bytes([t - 3]) for t in tokens).decode(errors="replace")


def logprob(token: int, position: int) -> float:
    return -((31 * token + 7 * position) % 97 + 1) / 50


def _prompts(prompt: Any) -> list[list[int]]:
    """A request's prompts as token lists: one text, texts, one token list, or token lists."""
    items = prompt if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int) else [prompt]
    return [encode(p) if isinstance(p, str) else [int(t) for t in p] for p in items]


def _echo(k: int, tokens: list[int]) -> dict[str, Any]:
    values: list[Any] = [None]
    tops: list[Any] = [None]
    for pos, tok in enumerate(tokens[1:] + [tokens[-1]], start=1):
        value = logprob(tok, pos)
        values.append(value)
        tops.append({str(tok): value, **({"best": value + 0.5} if tok % 3 == 0 else {})})
    return {"index": k, "text": "", "logprobs": {"token_logprobs": values, "top_logprobs": tops}}


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    prompts = _prompts(body["prompt"])
    if body.get("echo"):
        return {"choices": [_echo(k, p) for k, p in enumerate(prompts)]}
    return {"choices": [{"index": k, "text": f" answer {sum(p) % 1000}"} for k, p in enumerate(prompts)]}


class TokenizerServer(LoopbackJsonServer):
    def __init__(
        self, model: str, *, tokenizer_endpoints: bool = False, tokenizer_info: dict[str, Any] | None = None
    ) -> None:
        self.model = model
        self.tokenizer_endpoints = tokenizer_endpoints
        self.tokenizer_info = INFO if tokenizer_info is None else tokenizer_info
        self.posts: list[tuple[str, Any]] = []
        self.gets: list[str] = []

    def completions(self) -> list[Any]:
        """The body of every ``/v1/completions`` request, in arrival order."""
        return [body for path, body in self.posts if path == "/v1/completions"]

    def handler(self) -> type[JsonHandler]:
        srv = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                srv.gets.append(self.path)
                if self.path == "/v1/models":
                    self.reply({"object": "list", "data": [{"id": srv.model, "object": "model"}]})
                elif self.path == "/tokenizer_info" and srv.tokenizer_endpoints:
                    self.reply(srv.tokenizer_info)
                else:
                    self.reply({"error": "not found"}, 404)

            def do_POST(self) -> None:
                body = json.loads(self.body())
                srv.posts.append((self.path, body))
                if self.path == "/v1/completions":
                    self.reply(_answer(body))
                elif self.path == "/tokenize" and srv.tokenizer_endpoints:
                    self.reply({"tokens": encode(body["prompt"])})
                elif self.path == "/detokenize" and srv.tokenizer_endpoints:
                    self.reply({"prompt": decode(body["tokens"])})
                else:
                    self.reply({"error": "not found"}, 404)

        return Handler
