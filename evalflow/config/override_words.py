"""One command-line word ``[+|~]key=value`` split into its key and value: the only place evalflow
splits such a word, so every reader (the subcommands' grammar in :mod:`evalflow.commands.words`,
the Hydra run's pre-checks, lm-eval's front door, a run folder's recorded overrides) agrees on
where the key ends. It lives in ``config`` because library rooms read recorded overrides too, and
they may not import the command line.

    >>> split_word("gen_kwargs=max_gen_toks=7"), split_word("--json"), bare_key("+model.seed")
    (('gen_kwargs', 'max_gen_toks=7'), ('--json', None), 'model.seed')
"""

from __future__ import annotations


def split_word(word: str) -> tuple[str, str | None]:
    """``(key, value)`` split at the first ``=`` (a value may hold more); ``(word, None)`` without one."""
    key, eq, value = word.partition("=")
    return (key, value) if eq else (word, None)


def bare_key(key: str) -> str:
    """A key without Hydra's ``+``/``++`` (add) and ``~`` (delete) prefixes: the setting it names."""
    return key.lstrip("+~")
