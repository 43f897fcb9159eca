"""Literal ``\\n``/``\\t`` in task YAMLs (single-quoted or unquoted) are warned about when the task is
loaded, naming the file that sets the key, the key and the fix; the legitimate backslashes (Jinja
string literals, LaTeX, Python list literals, regexes) are not."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from evalflow.run.load_checks import load_warnings
from evalflow.taskspec.format.escapes import literal_escapes
from evalflow.taskspec.format.loader import load_yaml, task_from_dict
from evalflow.taskspec.format.spec import TaskConfig
from tests.support.runs import Runner

BS = "\\"  # one backslash, so the cases below read as the YAML values they stand for

FLAGGED = [
    ("generation_kwargs.until", {"generation_kwargs": {"until": [BS + "n"]}}),
    ("generation_kwargs.until", {"generation_kwargs": {"until": BS + "n" + BS + "n"}}),
    ("target_delimiter", {"target_delimiter": BS + "t"}),
    ("fewshot_delimiter", {"fewshot_delimiter": BS + "n" + BS + "n"}),
    ("fewshot_config.fewshot_delimiter", {"fewshot_config": {"fewshot_delimiter": BS + "n"}}),
    ("doc_to_text", {"doc_to_text": "Q: {{q}}" + BS + "nA:"}),
    ("doc_to_text", {"doc_to_text": "{{q}}" + BS + "n"}),
    ("description", {"description": "Answer briefly." + BS + "n" + BS + "n"}),
    ("doc_to_choice", {"doc_to_choice": ["yes" + BS + "n", "no"]}),
]

NOT_FLAGGED = [
    {"generation_kwargs": {"until": ["\n", "\n\n", "Question:"]}},  # double-quoted: real newlines
    {"doc_to_text": "{{ q.split('" + BS + "n')[0] }}" + "\nA:"},  # Jinja string literal decodes it
    {"doc_to_text": "{% set s = '" + BS + "t' %}{{ q }}"},
    {"doc_to_text": "Is $a " + BS + "neq b$ and " + BS + "theta " + BS + "times 2?\nA:"},  # LaTeX
    {"doc_to_text": "Escaped: " + BS + BS + "n stays as typed"},
    {"doc_to_choice": "['''{{a}}" + BS + "nIs it correct? yes''', '''{{a}}" + BS + "nIs it correct? no''']"},
    {"filter_list": ({"name": "x", "filter": [{"function": "regex", "regex_pattern": BS + "n(.*)"}]},)},
]


@pytest.mark.parametrize("key,fields", FLAGGED, ids=[f"{k}-{i}" for i, (k, _) in enumerate(FLAGGED)])
def test_literal_escapes_are_found(key: str, fields: dict) -> None:
    assert [f.key for f in literal_escapes(TaskConfig(task="t", **fields))] == [key]


@pytest.mark.parametrize("fields", NOT_FLAGGED, ids=[str(i) for i in range(len(NOT_FLAGGED))])
def test_legitimate_backslashes_are_not_flagged(fields: dict) -> None:
    assert literal_escapes(TaskConfig(task="t", **fields)) == ()


def test_no_builtin_task_warns() -> None:
    tasks = [
        task_from_dict(raw, str(path))
        for path in sorted((Path(__file__).parents[3] / "tasks").rglob("*.yaml"))
        if "group" not in (raw := load_yaml(path))
    ]
    assert len(tasks) > 60
    assert load_warnings(tasks, None) == []


SINGLE_QUOTED_UNTIL = """\
include: toy_gen.yaml
task: toy_quoted
generation_kwargs:
  until: ['\\n']
"""


def test_run_show_and_validate_warn_about_a_single_quoted_until(
    runner: Runner,
    toy_library: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from evalflow.commands import show, validate

    path = toy_library / "toy_quoted.yaml"
    path.write_text(SINGLE_QUOTED_UNTIL)
    with caplog.at_level(logging.WARNING):
        runner(task="toy_quoted", limit=2)
    run_warnings = [r.getMessage() for r in caplog.records if "generation_kwargs.until" in r.getMessage()]
    assert len(run_warnings) == 1
    message = run_warnings[0]
    assert str(path) in message and "task 'toy_quoted'" in message
    assert "max_gen_toks" in message and 'double quotes, e.g. "\\n"' in message

    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / "cache"))
    args = ["task=toy_quoted", f"include_path=[{toy_library}]", "n=1"]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert show.main(args) == 0
    assert [r.getMessage() for r in caplog.records if "generation_kwargs.until" in r.getMessage()] == [message]
    capsys.readouterr()
    assert validate.main(args) == 0  # a warning, not a failure
    assert f"evalflow: warning: {message}" in capsys.readouterr().err


def test_a_template_shared_by_tasks_warns_once_naming_the_template(toy_library: Path) -> None:
    (toy_library / "_tmpl.yaml").write_text("include: toy_gen.yaml\ndoc_to_text: 'Q: {{question}}\\nA:'\n")
    tasks = []
    for name in ("toy_a", "toy_b"):
        (toy_library / f"{name}.yaml").write_text(f"include: _tmpl.yaml\ntask: {name}\n")
        tasks.append(task_from_dict(load_yaml(toy_library / f"{name}.yaml"), str(toy_library / f"{name}.yaml")))
    (warning,) = load_warnings(tasks, None)
    assert warning.startswith(f"{toy_library / '_tmpl.yaml'}: `doc_to_text` of tasks 'toy_a', 'toy_b'")


def test_the_warning_quotes_the_value_around_the_sequence() -> None:
    template = "x" * 100 + "{{ q.split('" + BS + "n') }} Answer:" + BS + "n" + "Z" * 100
    (finding,) = literal_escapes(TaskConfig(task="t", doc_to_text=template))
    assert template[finding.at : finding.at + 2] == BS + "n" and finding.at > 120  # not the one inside {{ }}
    message = finding.message("task 't'", "t.yaml")
    assert "holds '...xxx{{ q.split('" + BS + "n') }} Answer:" + BS + "nZZZ" in message and "Z" * 30 not in message
