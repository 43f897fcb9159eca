"""One grammar (issue 50): every command's words are declared once, and the reference pages of
docs/reference/ and ``--help`` are written from that declaration; lm-eval's front door maps its
flags onto the run's own settings."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from evalflow.commands.reference import declarations, help_text, page, page_file, page_title, pages
from evalflow.commands.words import Command, Flag, Option, SettingWords, parse_words
from evalflow.config.schema import RunConfig
from evalflow.errors import ConfigError
from evalflow.lmeval_compat.parser import FLAGS
from evalflow.lmeval_compat.translate import LOGGER_FLAGS, MODEL_FLAGS, OTHER_FLAGS, REFUSED_FLAGS, SETTING_FLAGS
from tests.support.paths import ROOT

PAGES = ROOT / "docs" / "reference"


def test_each_reference_page_is_written_from_its_declaration() -> None:
    """A page edited by hand, or a declaration changed without its page, fails here; fix it with
    ``python -m evalflow.commands.reference``."""
    written = {path.name: path.read_text(encoding="utf-8") for path in PAGES.glob("*.md")}
    stale = sorted(name for name, text in pages().items() if written.get(name) != text)
    assert stale == [], (
        f"docs/reference/ differs from the declarations: {stale}; run python -m evalflow.commands.reference"
    )
    assert sorted(written) == sorted(pages()), "a page in docs/reference/ no command declares"


def test_the_sync_check_sees_a_changed_declaration() -> None:
    compare = next(c for c in declarations() if c.name == "compare")
    changed = dataclasses.replace(compare, options=compare.options[1:])
    assert (PAGES / page_file(compare)).read_text(encoding="utf-8") != page(changed)


def _reference_nav() -> dict[str, str]:
    """mkdocs.yml's "Command reference" section: page → label (its ``!ENV`` values are not needed)."""
    loader = type("NavLoader", (yaml.SafeLoader,), {})
    loader.add_constructor("!ENV", lambda _loader, _node: None)
    nav = yaml.load((PAGES.parents[1] / "mkdocs.yml").read_text(encoding="utf-8"), Loader=loader)["nav"]
    section = next(item["Command reference"] for item in nav if "Command reference" in item)
    return {target: label for entry in section for label, target in entry.items()}


def test_every_reference_page_is_in_the_nav_under_its_title() -> None:
    nav = _reference_nav()
    for command in declarations():
        assert nav.get(f"reference/{page_file(command)}") == page_title(command), (
            f"mkdocs.yml's nav must list the page under 'Command reference': "
            f"- {page_title(command)}: reference/{page_file(command)}"
        )


def test_help_lists_every_word_the_command_parses() -> None:
    for command in declarations():
        text = help_text(command)
        assert text.startswith(command.line())
        for word in [*command.flags, *command.options, *(a for c in command.actions for a in c.options)]:
            assert (word.name if isinstance(word, Flag) else f"{word.name}=") in text, (command.name, word.name)


def test_the_run_page_lists_every_declared_run_setting() -> None:
    run = next(c for c in declarations() if not c.name)
    assert [o.name for o in run.options] == [f.name for f in dataclasses.fields(RunConfig)]
    assert next(o for o in run.options if o.name == "seed").default == 1234


def test_lm_eval_flags_map_onto_declared_run_settings() -> None:
    settings = {f.name for f in dataclasses.fields(RunConfig)}
    assert set(SETTING_FLAGS.values()) <= settings
    flags = {names[0].lstrip("-") for names in FLAGS}
    classified = [SETTING_FLAGS, MODEL_FLAGS, OTHER_FLAGS, REFUSED_FLAGS, LOGGER_FLAGS]
    assert all(sum(flag in table for table in classified) == 1 for flag in flags), "each flag in one table"
    assert set().union(*classified) == flags


GRAMMAR = Command(
    "demo",
    "a demo",
    "FILE",
    1,
    1,
    (Option("seed", int, 7, "a seed"), Option("path", lambda v: v.split(","), None, "folders", many=True)),
    (Flag("--json", "as JSON"),),
    SettingWords(("task",), "the task"),
)


def test_parse_words_types_repeats_defaults_and_passes_settings_on() -> None:
    words = parse_words(["f", "path=a,b", "+path=c", "task=t", "--json"], GRAMMAR)
    assert words.positional == ("f",) and words.flags == {"--json"} and words.passed == ("task=t",)
    assert words.options == {"path": ["a", "b", "c"]} and words.value("seed") == 7


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["f", "seed=x"], "demo: seed=x: seed takes a whole number. usage: python -m evalflow demo FILE"),
        (["f", "sead=1"], r"demo: unknown option 'sead=' \(did you mean 'seed'\?\)"),
        (["f", "--jsn"], r"demo: unknown flag '--jsn' \(did you mean '--json'\?\)"),
        (["f", "limit=3"], "demo: unknown option 'limit='"),
        ([], r"demo: takes 1 FILE \(got 0: none\)"),
    ],
)
def test_parse_words_refuses_in_one_paragraph(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_words(argv, GRAMMAR)


def test_a_command_taking_every_run_setting_refuses_hydras_own() -> None:
    preview = dataclasses.replace(GRAMMAR, settings=SettingWords())
    assert parse_words(["f", "model.pretrained=x"], preview).passed == ("model.pretrained=x",)
    with pytest.raises(ConfigError, match="hydra.run.dir= does nothing here"):
        parse_words(["f", "hydra.run.dir=d"], preview)
