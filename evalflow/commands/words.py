"""The one grammar of evalflow's command line: each subcommand declares its words once, as a
:class:`Command` (positional words, ``--flags``, ``key=value`` options with their type, default and
help, and the run settings it hands on), and :func:`parse_words` reads every word from that
declaration, refusing anything else in one paragraph naming the word and the usage. ``--help`` and
the reference pages (docs/reference/, :mod:`evalflow.commands.reference`) are written from the same
declaration, so what is parsed, what ``--help`` says and what the docs say cannot drift apart. An
option that a subcommand silently ignored would look honoured (``rescore ... hydra.run.dir=D``
writing elsewhere, ``compare --jsn`` printing a table).

    >>> seed = Option("seed", int, 1234, "the bootstrap's seed")
    >>> compare = Command("compare", "", "RUN_A RUN_B", 2, 2, (seed,), (Flag("--json", ""),))
    >>> words = parse_words(["a", "b", "--json", "seed=3"], compare)
    >>> words.positional, dict(words.options), sorted(words.flags), words.value("seed")
    (('a', 'b'), {'seed': 3}, ['--json'], 3)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalflow.config.override_words import bare_key, split_word
from evalflow.errors import ConfigError, closest

_KINDS: dict[Any, str] = {int: "a whole number", float: "a number", str: "text"}


def kind(convert: Callable[[str], Any]) -> str:
    """What a value type accepts, in words: its entry in ``_KINDS``, else its docstring."""
    return _KINDS.get(convert) or (convert.__doc__ or "").strip() or "another value"


# Value types several commands share (an Option's ``convert``; its docstring is the help's type).
_BOOLS = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


def folder_list(value: str) -> list[str]:
    """a folder, or a list of them: [a,b]"""
    value = value.strip()
    items = value[1:-1].split(",") if value.startswith("[") and value.endswith("]") else [value]
    return [item.strip().strip("'\"") for item in items if item.strip().strip("'\"")]


def boolean(value: str) -> bool:
    """true or false (yes/no, 1/0)"""
    if value.lower() not in _BOOLS:
        raise ValueError(value)
    return _BOOLS[value.lower()]


@dataclass(frozen=True)
class Option:
    """A ``name=value`` word: ``type`` converts the value (a ``ValueError`` refuses it as not
    ``kind(type)``; a ``ConfigError`` refuses it in its own words); ``default`` is what the
    command uses without the word (``None``: as ``help`` says); ``many``: repeatable, the values
    (lists) joined in order."""

    name: str
    type: Callable[[str], Any] = str
    default: Any = None
    help: str = ""
    many: bool = False
    type_name: str = ""  # the type as the docs name it, when not ``kind(type)`` (a run setting's annotation)

    def kind(self) -> str:
        return self.type_name or kind(self.type)


@dataclass(frozen=True)
class Flag:
    name: str  # with its dashes: --json
    help: str


@dataclass(frozen=True)
class SettingWords:
    """The run settings (evalflow/config/schema.py) a command takes as ``key=value`` words, handed
    on unparsed to the run's composition, which types them: ``names`` (``None``: every setting,
    model keys and presets too, but no ``hydra.*``, since the command starts no Hydra job)."""

    names: tuple[str, ...] | None = None
    help: str = ""

    def takes(self, key: str) -> bool:
        return self.names is None or bare_key(key) in self.names


@dataclass(frozen=True)
class Command:
    """One subcommand's words, declared once; ``summary`` is its line in ``python -m evalflow --help``,
    ``doc`` the description its ``--help`` and reference page print."""

    name: str
    summary: str
    positional: str = ""
    min_positional: int = 0
    max_positional: int | None = None
    options: tuple[Option, ...] = ()
    flags: tuple[Flag, ...] = ()
    settings: SettingWords | None = None
    note: str = ""  # what else it takes, and why the rest is refused
    doc: str = ""
    actions: tuple[Command, ...] = ()  # ``cache stats``, ``cache gc``...: each a command of its own

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)

    def words(self) -> str:
        """The words it takes, as its usage line writes them (the run's settings, too many to
        spell out there, as ``[key=value ...]``)."""
        options = ["[key=value ...]"] if not self.name else [f"[{o.name}=...]" for o in self.options]
        if self.name and self.settings is not None and self.settings.names is None:
            options.append("[any run setting=value ...]")
        parts = [self.positional, *(f"[{f.name}]" for f in self.flags), *options]
        return " ".join(p for p in parts if p)

    def line(self) -> str:
        """The usage line every refusal ends with."""
        return " ".join(p for p in ("usage: python -m evalflow", self.name, self.words(), self.note) if p)


@dataclass(frozen=True)
class Words:
    positional: tuple[str, ...]
    options: Mapping[str, Any]  # the options given, typed
    flags: frozenset[str]
    passed: tuple[str, ...] = ()  # ``key=value`` words for the run settings, in order
    defaults: Mapping[str, Any] = field(default_factory=dict)

    def value(self, name: str) -> Any:
        """The option's value as given, else its declared default."""
        return self.options[name] if name in self.options else self.defaults.get(name)


def parse_words(argv: Sequence[str], command: Command) -> Words:
    """``argv`` split into positional words, typed options, flags and passed-on settings."""
    positional: list[str] = []
    options: dict[str, Any] = {}
    flags: set[str] = set()
    passed: list[str] = []
    for word in argv:
        key, value = split_word(word)
        option = command.option(key.lstrip("+")) if value is not None else None
        if word.startswith("-"):
            if word not in {f.name for f in command.flags}:
                names = [f.name for f in command.flags]
                raise ConfigError(f"{command.name}: unknown flag '{word}'{_hint(word, names)}. {command.line()}")
            flags.add(word)
        elif option is not None and value is not None:
            typed = _typed(command, option, word, value)
            options[option.name] = [*options.get(option.name, []), *typed] if option.many else typed
        elif value is not None and command.settings is not None and command.settings.takes(key):
            passed.append(_setting_word(command, key, word))
        elif value is not None:
            names = [o.name for o in command.options]
            raise ConfigError(f"{command.name}: unknown option '{key}='{_hint(key, names)}. {command.line()}")
        else:
            positional.append(word)
    _check_count(command, positional)
    defaults = {o.name: o.default for o in command.options}
    return Words(tuple(positional), options, frozenset(flags), tuple(passed), defaults)


def _typed(command: Command, option: Option, word: str, value: str) -> Any:
    try:
        return option.type(value)
    except ValueError:
        raise ConfigError(f"{command.name}: {word}: {option.name} takes {option.kind()}. {command.line()}") from None
    except ConfigError as exc:
        raise ConfigError(f"{command.name}: {exc}") from None


def _setting_word(command: Command, key: str, word: str) -> str:
    """A run setting's word, refused when it names Hydra's own settings, which only a run reads."""
    if (
        command.settings is not None
        and command.settings.names is None
        and bare_key(key).startswith(("hydra.", "hydra/"))
    ):
        raise ConfigError(
            f"{command.name}: {key}= does nothing here: {command.name} starts no Hydra job and writes no run "
            "folder (it takes the run's own settings, key=value, and n=)"
        )
    return word


def _check_count(command: Command, positional: list[str]) -> None:
    least, most = command.min_positional, command.max_positional
    if least <= len(positional) and (most is None or len(positional) <= most):
        return
    if most == 0:
        raise ConfigError(
            f"{command.name}: unexpected argument '{positional[0]}'; it takes key=value words. {command.line()}"
        )
    wanted = f"{least}" if most == least else f"{least} or more" if most is None else f"{least} to {most}"
    raise ConfigError(
        f"{command.name}: takes {wanted} {command.positional} (got {len(positional)}: "
        f"{' '.join(positional) or 'none'}). {command.line()}"
    )


def asks_for_help(argv: Sequence[str]) -> bool:
    """Whether ``-h`` or ``--help`` is among the words: help wins over every other word."""
    return any(word in ("-h", "--help") for word in argv)


def _hint(word: str, known: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` when a known name is close, else nothing (the usage line lists them)."""
    near = closest(word, known)
    return f" ({near})" if near.startswith("did you mean") else ""
