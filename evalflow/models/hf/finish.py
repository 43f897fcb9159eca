"""Why a transformers generation ended and how many tokens it took, read from its generated ids.

A row of ``model.generate`` does not say why it stopped: the batch stops together once every row
has met a stop sequence (lm-eval's ``MultiTokenEOSCriteria``), so a row that met one early keeps
generating, and a row that ended at EOS is padded after it. So the reason is read back from the
row's tokens, the same way whichever batch or engine produced them (the fast engine's decode loop
stops each row at once; its rows hold no tokens past the end, and give the same :class:`Finish`):

- ``stop``: the shortest prefix of the tokens whose text holds a stop sequence (decoded with the
  special tokens, as the stopping criterion decodes them) ends the answer there, EOS or not after it;
- ``eos``: else the first end-of-sequence token (the model's generation config's, or the
  tokenizer's: lm-eval stops at its text);
- ``length``: else the row ran to its token budget.

``completion_tokens`` counts up to and including the stop sequence's last token or the EOS token,
never what the batch generated after it or its padding. A stop sequence that is the EOS token's
text (lm-eval adds it to every request's stops), spelled by ordinary tokens, is an ``eos``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from evalflow.core.records import Finish

Decode = Callable[[list[int]], str]


def eos_token_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    """The ids that end a generation: the model's generation config's EOS ids and the tokenizer's."""
    config = getattr(model, "generation_config", None)
    eos = getattr(config, "eos_token_id", None)
    ids = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return frozenset(ids)


def generation_finish(
    tokens: Sequence[int],
    prompt_tokens: int,
    until: Sequence[str],
    eos_ids: Collection[int],
    eos_text: str | None,
    decode: Decode,
) -> Finish:
    """The :class:`Finish` of one row's generated ``tokens`` (padding and tokens after the end
    included), its context being ``prompt_tokens`` long; ``decode`` keeps special tokens."""
    row = list(tokens)
    eos_at = next((i for i, t in enumerate(row) if t in eos_ids), None)
    head = row if eos_at is None else row[:eos_at]
    stops = [s for s in until if s]
    n = _first_stop(head, stops, decode)
    if n is not None:
        met = [s for s in stops if s in decode(head[:n])]
        reason = "eos" if eos_text is not None and set(met) == {eos_text} else "stop"
        return Finish(reason, prompt_tokens, n)
    if eos_at is not None:
        return Finish("eos", prompt_tokens, eos_at + 1)
    return Finish("length", prompt_tokens, len(row))


def _first_stop(tokens: list[int], stops: Sequence[str], decode: Decode) -> int | None:
    """The fewest leading tokens whose text holds a stop sequence (None: no prefix does), found by
    bisection: a prefix's text is a prefix of a longer one's, so holding a stop is monotone."""

    def holds(n: int) -> bool:
        text = decode(tokens[:n])
        return any(s in text for s in stops)

    if not stops or not tokens or not holds(len(tokens)):
        return None
    lo, hi = 1, len(tokens)
    while lo < hi:
        mid = (lo + hi) // 2
        if holds(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo
