"""A deterministic, instant model with all three request types, for tests, demos and dry runs.

Answers are derived from an xxhash of the request, so different inputs get different answers and
the same input always gets the same one, in any process. ``calls`` counts requests answered, which
is how the tests prove what the cache saved. A generation reports how it ended as a real backend
does, counting a word as a token: ``stop`` where a stop sequence cut it, ``length`` where the
request's ``max_gen_toks`` (if given) cut it to that many words, else ``eos``.

>>> m = DummyModel()
>>> same = [Request("loglikelihood", ("2+2=", " 4")) for _ in range(2)]  # two equal requests
>>> m.loglikelihood(same[:1]) == m.loglikelihood(same[1:])
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import xxhash

from evalflow.core.records import Finish, Generation, Request
from evalflow.models.protocol import LanguageModel, default_identity

_WORDS = ("the", "answer", "is", "so", "we", "get", "then", "total", "each", "and")


def _unit(*parts: Any) -> float:
    """A stable number in [0, 1) from the parts."""
    h = xxhash.xxh64_intdigest("\x1f".join(map(str, parts)).encode("utf-8", "surrogatepass"))
    return h / 2**64


class DummyModel(LanguageModel):
    """Deterministic pseudo-model: log-likelihoods and generations are hashes of the request."""

    def __init__(self, salt: str = "", **_: Any) -> None:
        self.salt = salt
        self.calls = 0

    @classmethod
    def identity(cls, **config: Any) -> dict[str, Any]:
        return default_identity("dummy", {"salt": config.get("salt", "")})

    def loglikelihood(self, requests: Sequence[Request]) -> list[tuple[float, bool]]:
        self.calls += len(requests)
        out = []
        for r in requests:
            context, continuation = r.args
            u = _unit(self.salt, "ll", context, continuation)
            out.append((-(1.0 + 9.0 * u) * max(1, len(continuation.split())), u < 0.25))
        return out

    def loglikelihood_rolling(self, requests: Sequence[Request]) -> list[float]:
        self.calls += len(requests)
        return [-(0.5 + _unit(self.salt, "roll", r.args[0])) * max(1, len(r.args[0])) for r in requests]

    def generate_until(self, requests: Sequence[Request]) -> list[Generation]:
        self.calls += len(requests)
        out = []
        for r in requests:
            context, gen_kwargs = r.args
            u = _unit(self.salt, "gen", context, r.repeat if r.seed is not None else 0, r.seed)
            words = [_WORDS[int(u * 1000 * (i + 1)) % len(_WORDS)] for i in range(3 + int(u * 5))]
            out.append(_ended(" ".join(words) + f" #### {int(u * 100)}", len(str(context).split()), gen_kwargs or {}))
        return out


def _ended(text: str, prompt_tokens: int, gen_kwargs: Any) -> Generation:
    """``text`` cut at its first stop sequence, else at ``max_gen_toks`` words, and why it ended."""
    budget = gen_kwargs.get("max_gen_toks")
    cut, used = text, 0
    for stop in gen_kwargs.get("until") or ():
        if stop and stop in cut:
            cut = cut[: cut.index(stop)]
            used = len(text[: len(cut) + len(stop)].split())  # the words up to the stop's end
    if cut != text and (budget is None or used <= int(budget)):
        return Generation(cut, Finish("stop", prompt_tokens, used))
    words = text.split()
    if budget is not None and len(words) > int(budget):
        return Generation(" ".join(words[: int(budget)]), Finish("length", prompt_tokens, int(budget)))
    return Generation(text, Finish("eos", prompt_tokens, len(words)))
