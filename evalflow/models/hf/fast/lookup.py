"""Draft tokens for greedy decoding, copied from the row's own text (prompt-lookup speculation).

A decode step on a CPU or GPU is bound by reading the weights, not by arithmetic: feeding a row
five tokens costs about what feeding it one does. Greedy text often repeats what the row has
already seen: numbers and names from the question, the few-shot answers' phrasing, and a small
model's repeated lines. So before each step a row proposes the tokens that followed the last
earlier occurrence of its newest n-gram (``n`` = :data:`MAX_NGRAM` down to 1); the step scores
the row's next token and the drafts in one pass, and keeps each draft for as long as it equals
the model's own greedy choice at that position, plus the model's token after the last kept one.
The answer is the one the model gives one token at a time (a kept draft *is* the argmax there),
up to the float noise of a differently shaped pass.

:class:`NgramIndex` keeps, per n-gram, where it last ended before the row's newest token, updated
as tokens are appended, so proposing costs the same however long the row is.

>>> index = NgramIndex([5, 6, 7, 8, 5, 6], max_ngram=2)
>>> index.propose(3)  # "5 6" ended at 1 before; what followed it:
[7, 8, 5]
>>> index.append(9); index.propose(3)  # "6 9" and "9" never seen before
[]
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_NGRAM = 3  # longest n-gram looked up; longer matches add little on gsm8k


class NgramIndex:
    """A row's tokens and, per n-gram (1..``max_ngram``), the last position it ended at, not
    counting the n-gram that ends at the newest token (that one is what is looked up)."""

    def __init__(self, tokens: Sequence[int], max_ngram: int = MAX_NGRAM) -> None:
        self.tokens: list[int] = []
        self.max_ngram = max_ngram
        self._last_end: dict[tuple[int, ...], int] = {}
        for token in tokens:
            self.append(token)

    def append(self, token: int) -> None:
        """Add the row's next token; the n-grams that ended at the previous one become findable."""
        end = len(self.tokens) - 1
        for n in range(1, min(self.max_ngram, end + 1) + 1):
            self._last_end[tuple(self.tokens[end - n + 1 : end + 1])] = end
        self.tokens.append(token)

    def propose(self, k: int) -> list[int]:
        """Up to ``k`` tokens that followed the newest n-gram's last earlier occurrence (the
        longest n-gram that occurred before), or none."""
        if k <= 0:
            return []
        for n in range(min(self.max_ngram, len(self.tokens)), 0, -1):
            end = self._last_end.get(tuple(self.tokens[-n:]))
            if end is not None:
                return self.tokens[end + 1 : end + 1 + k]
        return []
