"""The table of lm-eval 0.4.13's whole surface (issue 51, item 5): docs/lm-eval-surface.md is written
from the front door's declarations over the snapshot of lm-eval's surface, every word of that
snapshot has a marked row, the marks follow the declarations, and the snapshot is lm-eval's own
surface (re-dumped from the peer venv's source)."""

from __future__ import annotations

import dataclasses

import pytest

from evalflow.lmeval_compat import parser, translate
from evalflow.lmeval_compat.model_map import MODELS, REFUSED_MODELS, ModelMap
from evalflow.lmeval_compat.surface import MARKS, OTHER_KEYWORDS, Row, counts, load_surface, page, rows
from tests.support.parity_harness import PEER_VENV
from tests.support.paths import ROOT

PAGE = ROOT / "docs" / "lm-eval-surface.md"


def test_the_surface_page_is_written_from_the_declarations() -> None:
    """The page edited by hand, or a declaration changed without regenerating it, fails here."""
    assert PAGE.read_text(encoding="utf-8") == page(load_surface()), (
        "docs/lm-eval-surface.md differs from the front door's declarations; "
        "run python -m evalflow.lmeval_compat.surface"
    )


def _expected_words(surface: dict) -> int:
    """One row per subcommand, flag, model type, simple_evaluate and TaskManager argument; per model
    class, one row per argument (and one for other keywords) where a model type of it is mapped,
    else one row for the whole class."""
    per_class = [
        len(spec["args"]) + spec["extra"] if any(m in MODELS for m, c in surface["models"].items() if c == cls) else 1
        for cls, spec in surface["classes"].items()
    ]
    return sum(
        [
            len(surface["subcommands"]),
            len(surface["subcommands"]["run"]),
            len(surface["models"]),
            sum(per_class),
            len(surface["simple_evaluate"]),
            len(surface["task_manager"]),
        ]
    )


def test_every_word_of_lm_evals_surface_has_one_marked_row() -> None:
    surface = load_surface()
    table = rows(surface)
    assert len(table) == _expected_words(surface)
    unmarked = [r for r in table if r.mark not in MARKS or (r.mark != "same" and not r.text.strip())]
    assert unmarked == [], "rows without a mark, or without what they map to or why"
    words = {r.word.split(" ")[0] for r in table}
    assert {", ".join(names) for names in surface["subcommands"]["run"]} <= {
        r.word for r in table if r.surface == "flag"
    }
    assert set(surface["models"]) <= words
    assert sum(counts(table).values()) == len(table)


def _row(table: list[Row], surface: str, word: str) -> Row:
    return next(r for r in table if r.surface == surface and r.word == word)


def test_a_flag_lm_eval_adds_or_an_alias_evalflow_drops_is_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    surface = load_surface()
    surface["subcommands"]["run"].append(["--new_flag", "-N"])
    flags = {(("--limit",) if names == ("--limit", "-L") else names): n for names, n in parser.FLAGS.items()}
    monkeypatch.setattr(parser, "FLAGS", flags)  # a copy: the real one's order is its --help's
    table = rows(surface)
    assert _row(table, "flag", "--new_flag, -N") == Row(
        "flag", "--new_flag, -N", "refused", "evalflow lm-eval does not parse it (lmeval_compat/parser.py)"
    )
    assert _row(table, "flag", "--limit, -L") == Row(
        "flag", "--limit, -L", "differs", "the run setting limit; -L not taken"
    )


def test_the_marks_follow_the_declarations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Un-refusing a flag, refusing one, mapping a model type: the table follows on regeneration."""
    before = rows(load_surface())
    assert _row(before, "flag", "--limit, -L").mark == "mapped"
    assert _row(before, "model type", "sglang").mark == "refused"
    assert _row(before, "model arguments", "SGLangLM (sglang)").mark == "refused"
    monkeypatch.setitem(translate.REFUSED_FLAGS, "limit", "a reason")
    monkeypatch.delitem(REFUSED_MODELS, "sglang")
    monkeypatch.setitem(MODELS, "sglang", ModelMap("openai_completions"))
    after = rows(load_surface())
    assert _row(after, "flag", "--limit, -L") == Row("flag", "--limit, -L", "refused", "a reason")
    assert _row(after, "model type", "sglang") == Row(
        "model type", "sglang", "mapped", "`model=openai_completions` (SGLangLM)"
    )
    assert (
        _row(after, "model argument", "SGLangLM: max_gen_toks").text
        == "`model.max_gen_toks` (conf/model/openai_completions.yaml)"
    )
    other = _row(after, "model argument", f"SGLangLM: {OTHER_KEYWORDS}")
    assert other.mark == "refused" and "has no such key" in other.text  # the front door's own paragraph


def test_a_model_that_passes_keys_on_maps_every_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(MODELS, "hf", dataclasses.replace(MODELS["hf"], unknown="pass"))
    table = rows(load_surface())
    assert (
        _row(table, "model argument", f"HFLM: {OTHER_KEYWORDS}").text == "`+model.KEY` (passed to the model as given)"
    )
    assert _row(table, "model argument", "HFLM: dtype").text == "`model.dtype` (conf/model/hf.yaml)"


# rows the acceptance allows to stay refused: model types whose engine evalflow does not wrap, and
# their classes' arguments (listed in one row per class)
_ENGINE_ROWS = ("model type", "model arguments")


def test_no_refused_row_a_user_of_a_wrapped_engine_would_hit() -> None:
    """The acceptance: *refused* only for an engine evalflow does not wrap (a model type, and its
    arguments), never for a flag, a subcommand, an argument of a mapped model or of simple_evaluate."""
    left = [r for r in rows(load_surface()) if r.mark == "refused" and r.surface not in _ENGINE_ROWS]
    listing = "\n".join(f"  {r.surface} {r.word}: {r.text[:100]}" for r in left)
    assert left == [], f"{len(left)} refused rows a user of a wrapped engine would hit:\n{listing}"


@pytest.mark.slow
def test_the_snapshot_is_lm_evals_own_surface() -> None:
    """lm-eval's argparse, model registry, model classes and signatures, read again from the peer
    venv: a flag, model type or argument lm-eval has and the snapshot lacks fails here (rewrite it
    with python -m tests.support.lmeval_surface_dump, then regenerate the page)."""
    if not (PEER_VENV / "bin" / "python").exists():
        pytest.skip(f"lm-eval's reference venv is not at {PEER_VENV}")
    from tests.support.lmeval_surface_dump import dump

    assert dump() == load_surface()
