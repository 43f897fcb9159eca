"""Refuse a server whose echoed log-probabilities are not the ones its model computes.

lm-eval scores a continuation by the ``token_logprobs`` a ``/v1/completions`` request with
``echo=true`` returns for the prompt's own tokens. A server that misplaces them scores every task
wrongly and silently: llama-cpp-python 0.3.36 returns, for models without a BOS token, position
i+1's value at position i, and leaves out the generated token (arc_easy with SmolLM2 falls from
0.60 to 0.25).

The check costs two short requests, before the first log-likelihood request to a server:

1. complete ``A`` by one greedy token ``t`` with ``logprobs=5``: ``top_logprobs[0][t]`` is
   log p(t | A) as the server computes it when generating;
2. echo ``A + t``: the log-probability listed at the position where ``t`` starts must be that same
   number (within ``TOLERANCE`` nats: prefill and decode kernels differ in float rounding), and the
   echoed tokens must include the generated one (listed after the prompt, at its end).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from evalflow.errors import ModelError

PROMPT = "The capital of France is"
TOLERANCE = 0.3  # nats; misaligned values differ by several nats, float noise by < 0.1


class MisalignedLogprobs(ModelError):
    """The server's echoed log-probabilities do not belong to the tokens they are listed with."""


def probe_bodies(model: str, seed: int) -> tuple[dict[str, Any], Any]:
    """The first request body, and a function of its answer giving the second's."""
    first = {"model": model, "prompt": PROMPT, "max_tokens": 1, "temperature": 0, "logprobs": 5, "seed": seed}

    def second(token_text: str) -> dict[str, Any]:
        return {
            "model": model,
            "prompt": PROMPT + token_text,
            "max_tokens": 1,
            "temperature": 0,
            "logprobs": 1,
            "seed": seed,
            "echo": True,
        }

    return first, second


def _logprobs(answer: Any, url: str) -> Mapping[str, Any]:
    try:
        lp = answer["choices"][0]["logprobs"]
        if isinstance(lp, Mapping) and isinstance(lp.get("token_logprobs"), list):
            return lp
    except (KeyError, IndexError, TypeError):
        pass
    raise MisalignedLogprobs(
        f"the server at {url} answered a logprobs request without token_logprobs ({json.dumps(answer)[:300]}); "
        "log-likelihood tasks need /v1/completions with echo and logprobs. Use a server that supports them."
    )


def generated_token(answer: Any, url: str) -> tuple[str, float]:
    """The greedy token's text and its log-probability from ``top_logprobs``."""
    lp = _logprobs(answer, url)
    tokens, tops = lp.get("tokens") or [], lp.get("top_logprobs") or []
    if not tokens or not tops or not isinstance(tops[0], Mapping) or tokens[0] not in tops[0]:
        raise MisalignedLogprobs(
            f"the server at {url} did not list the generated token in top_logprobs ({json.dumps(lp)[:300]}), "
            "so its log-probabilities cannot be checked. Set model.check_logprobs=false only if you have "
            "verified them otherwise."
        )
    return tokens[0], float(tops[0][tokens[0]])


def check_echo(answer: Any, token: str, expected: float, url: str) -> None:
    """Raise :class:`MisalignedLogprobs` unless the echo lists ``token`` after ``PROMPT`` with
    ``expected`` as its log-probability, followed by the generated token."""
    lp = _logprobs(answer, url)
    offsets, values, tokens = lp.get("text_offset"), lp["token_logprobs"], lp.get("tokens") or []
    if isinstance(offsets, list) and len(offsets) == len(values):
        where = [i for i, off in enumerate(offsets) if off == len(PROMPT)]
    else:  # no offsets: find the position by the echoed token texts
        text, where = "", []
        for i, tok in enumerate(tokens):
            if text == PROMPT:
                where = [i]
                break
            text += tok
    fix = (
        "Its scores would be wrong without any error, so evalflow refuses it. Serve the model with a server whose "
        "echoed log-probabilities are right (vLLM, SGLang, or a llama-cpp-python build with its echo+logprobs "
        "offsets fixed); set model.check_logprobs=false only to evaluate generation tasks or if you know better."
    )
    if not where or values[where[0]] is None:
        raise MisalignedLogprobs(
            f"the server at {url} echoed no token starting where '{token}' follows '{PROMPT}'. {fix}"
        )
    got = float(values[where[0]])
    if abs(got - expected) > TOLERANCE:
        raise MisalignedLogprobs(
            f"the server at {url} returns misaligned echoed log-probabilities: for '{PROMPT}' + '{token}' it "
            f"lists log p('{token}') = {got:.3f} when echoing, but {expected:.3f} when generating it (off by "
            f"{abs(got - expected):.2f} nats; llama-cpp-python <= 0.3.36 shifts them by one position for models "
            f"without a BOS token). {fix}"
        )
    if isinstance(offsets, list) and offsets and offsets[-1] < len(PROMPT + token):
        raise MisalignedLogprobs(
            f"the server at {url} leaves the generated token out of the echoed tokens, so lm-eval's "
            f"token_logprobs[ctxlen:-1] would drop the last token of every continuation. {fix}"
        )


def check_every_server(client: Any, model: str, seed: int, path: str) -> None:
    """The echo check on each of ``client``'s servers (its ``urls``, ``post_one(path, body, server)``):
    one short generation, then the same text echoed; raises :class:`ModelError` naming the first
    server whose echoed log-probability is misplaced."""
    first, second = probe_bodies(model, seed)
    for server, url in enumerate(client.urls):
        token, expected = generated_token(client.post_one(path, first, server), url)
        check_echo(client.post_one(path, second(token), server), token, expected, url)
