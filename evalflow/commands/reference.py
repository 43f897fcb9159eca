"""``--help`` and the reference pages (docs/reference/), both written from the commands'
declarations (:class:`~evalflow.commands.words.Command`): what a command parses is what its help
and its page say. The pages are committed, so they read on any Markdown viewer and the site builds
with no plugin; tests/commands/test_reference.py fails when one differs from its declaration, and
``python -m evalflow.commands.reference`` writes them again.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from evalflow.commands.words import Command, Flag, Option

_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj):`~?([^`]+)`")


def declarations() -> tuple[Command, ...]:
    """The run's declaration, then every subcommand's, in ``python -m evalflow --help``'s order."""
    from evalflow.commands.main import SUBCOMMANDS, declaration
    from evalflow.commands.overrides import run_command

    return (run_command(), *(declaration(name) for name in SUBCOMMANDS))


def help_text(command: Command) -> str:
    """What ``python -m evalflow NAME --help`` prints: usage, summary, description, then each word."""
    parts = [command.line(), command.summary, _doc(command)]
    rows = list(_rows(command))
    if rows:
        width = max(len(word) for word, _ in rows) + 2
        parts.append("words:\n" + "\n".join(f"  {word:<{width}}{text}" for word, text in rows))
    for action in command.actions:
        parts.append(help_text(action))
    return "\n\n".join(p for p in parts if p)


def print_help(command: Command) -> None:
    """A subcommand's ``--help``, written from its declaration."""
    print(help_text(command))


def _doc(command: Command) -> str:
    return inspect.cleandoc(command.doc) if command.doc.strip() else ""


def _rows(command: Command) -> Iterator[tuple[str, str]]:
    for flag in command.flags:
        yield flag.name, flag.help
    for option in command.options:
        yield f"{option.name}=", _option_help(option)
    if command.settings is not None:
        names = command.settings.names
        yield ("key=value" if names is None else " ".join(f"{n}=" for n in names)), command.settings.help


def _option_help(option: Option) -> str:
    default = "" if option.default is None else f"; default {option.default!r}"
    repeat = "; repeatable" if option.many else ""
    return f"{option.help} ({option.kind()}{default}{repeat})"


def page_file(command: Command) -> str:
    return f"{command.name.replace(' ', '-') or 'run'}.md"


def page_title(command: Command) -> str:
    return f"evalflow {command.name}" if command.name else "evalflow (a run)"


def page(command: Command) -> str:
    """The command's reference page, in Markdown."""
    lines = [f"# {page_title(command)}", "", _generated_note(), "", *_section(command)]
    for action in command.actions:
        lines += ["", f"## {action.name}", "", *_section(action)]
    return "\n".join(lines).rstrip() + "\n"


def _generated_note() -> str:
    return "<!-- written by `python -m evalflow.commands.reference` from the command's declaration; do not edit -->"


def _section(command: Command) -> list[str]:
    lines = [_markdown(command.summary), "", "```text", command.line(), "```"]
    doc = _doc(command)
    if doc:
        lines += ["", _markdown(doc)]
    declared: list[Flag | Option] = [*command.flags, *command.options]
    words = [_word_line(command, word) for word in declared]
    if command.settings is not None:
        names = command.settings.names
        taken = "any run setting, `key=value`" if names is None else ", ".join(f"`{n}=`" for n in names)
        words.append(f"- {taken}: {_markdown(command.settings.help)}")
    if words:
        lines += ["", "Its words:", "", *words]
    return lines


def _word_line(command: Command, word: Flag | Option) -> str:
    if isinstance(word, Flag):
        return f"- `{word.name}`: {_markdown(word.help)}"
    default = "" if word.default is None else f"; default `{word.default!r}`"
    return f"- `{word.name}=` ({_markdown(word.kind())}{default}): {_markdown(word.help)}".rstrip()


def _markdown(text: str) -> str:
    """Docstring text as Markdown: Sphinx roles as code spans, reST's ``::`` as a colon."""
    return re.sub(r"::$", ":", _ROLE.sub(r"`\1`", text), flags=re.MULTILINE)


def pages() -> dict[str, str]:
    """Every reference page: file name → text."""
    return {page_file(c): page(c) for c in declarations()}


def pages_folder() -> Path:
    """docs/reference/ of the source checkout the running code comes from (a wheel has no docs)."""
    from evalflow.config.packaged import source_checkout

    checkout = source_checkout()
    if checkout is None:
        raise SystemExit("the reference pages live in a source checkout's docs/reference/; name a folder to write")
    return checkout / "docs" / "reference"


def write_pages(folder: Path) -> list[Path]:
    """Write every reference page into ``folder``; the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in pages().items():
        (folder / name).write_text(text, encoding="utf-8")
        written.append(folder / name)
    return written


if __name__ == "__main__":
    for path in write_pages(Path(sys.argv[1]) if len(sys.argv) > 1 else pages_folder()):
        print(path)
