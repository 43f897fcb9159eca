"""doc_to_text / doc_to_target / doc_to_choice with lm-eval 0.4.13's semantics and evalflow's errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalflow.errors import DataError, TaskError
from evalflow.taskspec.format.spec import TaskConfig
from evalflow.taskspec.prompts.templates import (
    apply_template,
    doc_to_choice,
    doc_to_target,
    doc_to_text,
    resolve_field,
)

ARC_DOC = {
    "question": "Which is a gas?",
    "choices": {"text": ["ice", "steam", "rock"], "label": ["A", "B", "C"]},
    "answerKey": "B",
}


def task(**kw: object) -> TaskConfig:
    return TaskConfig(task="t", source="/x/t.yaml", **kw)  # type: ignore[arg-type]


def test_field_name_returns_the_raw_value_template_renders() -> None:
    t = task(doc_to_text="question", doc_to_target="answerKey")
    assert doc_to_text(t, ARC_DOC) == "Which is a gas?"
    assert doc_to_target(t, ARC_DOC) == "B"
    t2 = task(doc_to_text="Question: {{question}}\nAnswer:")
    assert doc_to_text(t2, ARC_DOC) == "Question: Which is a gas?\nAnswer:"


def test_arc_target_and_choices_as_lm_eval_reads_them() -> None:
    t = task(doc_to_target="{{choices.label.index(answerKey)}}", doc_to_choice="{{choices.text}}")
    assert doc_to_target(t, ARC_DOC) == 1  # digit string -> int because the task has choices
    assert doc_to_choice(t, ARC_DOC) == ["ice", "steam", "rock"]  # rendered repr -> literal list


def test_digit_target_stays_text_without_doc_to_choice() -> None:
    t = task(doc_to_target="{{n}}")
    assert doc_to_target(t, {"n": 42}) == "42"
    assert doc_to_target(task(doc_to_target="{{n}}", doc_to_choice=["a"]), {"n": 42}) == 42


def test_digit_text_becomes_int_only_with_choices() -> None:
    assert doc_to_text(task(doc_to_text="{{n}}"), {"n": 7}) == "7"
    assert doc_to_text(task(doc_to_text="{{n}}", doc_to_choice=["a", "b"]), {"n": 1}) == 1


def test_list_looking_target_is_a_literal_else_text() -> None:
    assert doc_to_target(task(doc_to_target="{{answers}}"), {"answers": ["x", "y"]}) == ["x", "y"]
    assert doc_to_target(task(doc_to_target="[{{a}}"), {"a": "b]"}) == "[b]"  # not a literal


def test_int_list_and_dict_specs() -> None:
    assert doc_to_text(task(doc_to_text=3), {}) == 3
    assert doc_to_target(task(doc_to_target=["a", "b"]), {}) == ["a", "b"]
    assert doc_to_choice(task(doc_to_choice=["no", "yes"]), {}) == ["no", "yes"]
    assert doc_to_choice(task(doc_to_choice={"a": "first", "b": "second"}), {}) == ["first", "second"]


def test_piqa_choice_template_builds_a_list_from_fields() -> None:
    t = task(doc_to_choice="{{[sol1, sol2]}}")
    assert doc_to_choice(t, {"sol1": "it's fine", "sol2": 'say "hi"'}) == ["it's fine", 'say "hi"']


def test_override_is_used_instead_of_the_task_value() -> None:
    t = task(doc_to_text="Q: {{q}}", doc_to_target="{{a}}", doc_to_choice=["x"])
    doc = {"q": "1", "a": "2", "t": "T"}
    assert doc_to_text(t, doc, override="q") == "1"
    assert doc_to_target(t, doc, override="{{t}}") == "T"
    assert doc_to_choice(t, doc, override=["y", "z"]) == ["y", "z"]


def test_callables_are_called_with_the_doc() -> None:
    t = task(doc_to_text=lambda d: d["q"] + "?", doc_to_choice=lambda d: [d["q"]])
    assert doc_to_text(t, {"q": "why"}) == "why?"
    assert doc_to_choice(t, {"q": "why"}) == ["why"]


def test_function_ref_is_resolved_through_the_loader(tmp_path: Path) -> None:
    from evalflow.taskspec.format.loader import function_ref

    (tmp_path / "helpers.py").write_text("def text(doc):\n    return doc['q'].upper()\n")
    ref = function_ref("helpers.text", str(tmp_path))
    assert doc_to_text(task(doc_to_text=ref), {"q": "shout"}) == "SHOUT"


def test_missing_field_is_a_task_error_naming_task_doc_and_field() -> None:
    t = task(doc_to_text="Q: {{questoin}}")
    with pytest.raises(TaskError) as err:
        doc_to_text(t, {"question": "x"}, doc_id=17)
    msg = str(err.value)
    assert "'t'" in msg and "document 17" in msg and "questoin" in msg and "question" in msg


def test_bad_syntax_is_a_task_error_and_row_failures_are_data_errors() -> None:
    with pytest.raises(TaskError, match="does not parse"):
        doc_to_text(task(doc_to_text="{{ q "), {"q": 1})
    t = task(doc_to_target="{{choices.label.index(answerKey)}}", doc_to_choice="{{choices.text}}")
    with pytest.raises(DataError, match="document 4"):
        doc_to_target(t, {**ARC_DOC, "answerKey": "Z"}, doc_id=4)


def test_choices_must_render_a_list() -> None:
    with pytest.raises(TaskError, match="not a list"):
        doc_to_choice(task(doc_to_choice="{{n}}"), {"n": 5})
    with pytest.raises(TaskError, match="not a Python literal"):
        doc_to_choice(task(doc_to_choice="{{words}}"), {"words": "a b"})
    with pytest.raises(TaskError, match="no doc_to_choice"):
        doc_to_choice(task(), {})


def test_jinja_environment_matches_lm_eval() -> None:
    # keep_trailing_newline, regex_replace filter, StrictUndefined
    assert apply_template("{{x}}\n", {"x": 1}) == "1\n"
    assert apply_template("{{ s | regex_replace('[0-9]+', '#') }}", {"s": "a1b22"}) == "a#b#"
    with pytest.raises(TaskError):
        apply_template("{{ y }}", {"x": 1})


def test_resolve_field_for_description_and_gen_prefix() -> None:
    doc = {"subject": "math", "prefix": "Answer:"}
    assert resolve_field(doc, None) is None and resolve_field(doc, "") is None
    assert resolve_field(doc, "prefix") == "Answer:"
    assert resolve_field(doc, "About {{subject}}.\n\n") == "About math.\n\n"


def test_use_prompt_and_bad_specs_are_refused() -> None:
    with pytest.raises(TaskError, match="promptsource"):
        doc_to_text(task(doc_to_text="q", use_prompt="p:1"), {"q": 1})
    with pytest.raises(TaskError, match="doc_to_text is None"):
        doc_to_text(task(), {})
    with pytest.raises(TaskError, match="float"):
        doc_to_target(task(doc_to_target=1.5), {})


def test_odd_values_are_evalflow_errors_not_crashes() -> None:
    t = task(doc_to_target="{{label}}", doc_to_choice="{{label}}")
    with pytest.raises(TaskError, match="not a Python literal"):
        doc_to_choice(t, {"label": "{[1]: 2}"}, doc_id=3)  # ast.literal_eval raises TypeError here
    assert doc_to_target(t, {"label": "[{[1]: 2}]"}) == "[{[1]: 2}]"  # not a literal: kept as text
    with pytest.raises(DataError, match="document 3: the field 'choices'"):
        doc_to_choice(task(doc_to_choice="choices"), {"choices": None}, doc_id=3)
    with pytest.raises(DataError, match="not a list of choices"):
        doc_to_choice(task(doc_to_choice=lambda d: 5), {})


def test_templates_are_sandboxed(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(TaskError, match="unsafe operation"):
        template = "{{ cycler.__init__.__globals__.os.open('MARKER', 64) }}".replace("MARKER", str(marker))
        apply_template(template, {"q": 1})
    assert not marker.exists()
    # ordinary string and list methods, as lm-eval's YAMLs use them, still work
    doc = {"text": "a b c", "choices": {"label": ["A", "B"]}, "k": "B"}
    assert (
        apply_template("{{text.split(' ')[:-1]|join(' ')}}|{{choices.label.index(k)}}|{{text.upper()}}", doc)
        == "a b|1|A B C"
    )
