"""The command line of a subcommand, every word accounted for, and its ``--help``: the one way
every module of :mod:`evalflow.commands` reads its words and prints its help.

A subcommand declares its flags (``--json``), its ``key=value`` options with their types, and how
many positional words (folders, files) it takes; :func:`parse_words` refuses anything else in one
paragraph naming the word and the usage. An option that a subcommand silently ignored would look
honoured (``rescore ... hydra.run.dir=D`` writing elsewhere, ``compare --jsn`` printing a table).

    >>> parse_words(["a", "b", "--json", "seed=3"], Usage("compare", "RUN_A RUN_B", {"seed": int}, ("--json",), 2, 2))
    Words(positional=('a', 'b'), options={'seed': 3}, flags=frozenset({'--json'}), passed=())
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalflow.errors import ConfigError, closest

_KINDS: dict[Any, str] = {int: "a whole number", float: "a number"}


@dataclass(frozen=True)
class Usage:
    """What a subcommand takes: ``options`` maps each ``key=`` to the type its value converts to;
    ``passthrough`` are prefixes of ``key=value`` words handed on unparsed (run settings)."""

    command: str
    positional_name: str
    options: Mapping[str, Callable[[str], Any]] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    min_positional: int = 0
    max_positional: int | None = None
    passthrough: Callable[[str], bool] | None = None
    note: str = ""  # what else it takes, and why the rest is refused

    def line(self) -> str:
        parts = [self.positional_name, *(f"[{f}]" for f in self.flags), *(f"[{k}=...]" for k in self.options)]
        usage = f"usage: python -m evalflow {self.command} {' '.join(p for p in parts if p)}"
        return f"{usage} {self.note}".rstrip()


@dataclass(frozen=True)
class Words:
    positional: tuple[str, ...]
    options: Mapping[str, Any]
    flags: frozenset[str]
    passed: tuple[str, ...] = ()  # ``key=value`` words for the run settings, in order


def parse_words(argv: Sequence[str], usage: Usage) -> Words:
    """``argv`` split into positional words, typed options, flags and passed-on settings."""
    positional: list[str] = []
    options: dict[str, Any] = {}
    flags: set[str] = set()
    passed: list[str] = []
    for word in argv:
        key, eq, value = word.partition("=")
        if word.startswith("-"):
            if word not in usage.flags:
                raise ConfigError(f"{usage.command}: unknown flag '{word}'{_hint(word, usage.flags)}. {usage.line()}")
            flags.add(word)
        elif eq and key in usage.options:
            try:
                options[key] = usage.options[key](value)
            except ValueError:
                kind = _KINDS.get(usage.options[key]) or usage.options[key].__doc__ or "another value"
                raise ConfigError(f"{usage.command}: {word}: {key} takes {kind}. {usage.line()}") from None
        elif eq and usage.passthrough is not None and usage.passthrough(key):
            passed.append(word)
        elif eq:
            raise ConfigError(f"{usage.command}: unknown option '{key}='{_hint(key, usage.options)}. {usage.line()}")
        else:
            positional.append(word)
    most = usage.max_positional
    if len(positional) < usage.min_positional or (most is not None and len(positional) > most):
        wanted = (
            f"{usage.min_positional}"
            if most == usage.min_positional
            else f"{usage.min_positional} or more"
            if most is None
            else f"{usage.min_positional} to {most}"
        )
        raise ConfigError(
            f"{usage.command}: takes {wanted} {usage.positional_name} (got {len(positional)}: "
            f"{' '.join(positional) or 'none'}). {usage.line()}"
        )
    return Words(tuple(positional), options, frozenset(flags), tuple(passed))


def asks_for_help(argv: Sequence[str]) -> bool:
    """Whether ``-h`` or ``--help`` is among the words: help wins over every other word."""
    return any(word in ("-h", "--help") for word in argv)


def print_help(doc: str | None, usage: str = "") -> None:
    """A subcommand's help: its usage line, a blank line and its description (``doc`` stripped);
    with no usage line, ``doc`` exactly as written."""
    print(f"{usage}\n\n{(doc or '').strip()}" if usage else doc)


def _hint(word: str, known: Any) -> str:
    """`` (did you mean 'x'?)`` when a known name is close, else nothing (the usage line lists them)."""
    near = closest(word, known)
    return f" ({near})" if near.startswith("did you mean") else ""
