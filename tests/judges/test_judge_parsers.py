"""The judge parsers as golden cases: judge text in, score out (None: unparsed)."""

from __future__ import annotations

from typing import Any

import pytest

from evalflow.errors import TaskError
from evalflow.judges.judge_spec import parse_judge


def parse(parser: dict[str, Any], text: str) -> float | None:
    return parse_judge("m", {"model": "dummy", "prompt": "{{ response }}", "parser": parser}, "t.yaml").parse(text)


@pytest.mark.parametrize(
    "parser, text, score",
    [
        ({"type": "regex", "pattern": r"Score: (\d+)"}, "Fine. Score: 4 of 5", 4.0),
        ({"type": "regex", "pattern": r"Score: (\d+)"}, "score: 4", None),
        ({"type": "regex", "pattern": r"score: (\d+)", "ignore_case": True}, "SCORE: 4", 4.0),
        ({"type": "regex", "pattern": r"\d+"}, "about 3", 3.0),  # no group: the whole match
        ({"type": "regex", "pattern": r"Verdict: (\w+)", "map": {"yes": 1, "no": 0}}, "Verdict: no", 0.0),
        ({"type": "regex", "pattern": r"Verdict: (\w+)", "map": {"yes": 1, "no": 0}}, "Verdict: maybe", None),
        ({"type": "regex", "pattern": r"Verdict: (\w+)"}, "Verdict: yes", None),  # not a number, no map
        ({"type": "choice", "choices": {"A": 1, "B": 0}}, " b) because", 0.0),
        ({"type": "choice", "choices": {"yes": 1, "no": 0}}, '"Yes."', 1.0),
        ({"type": "choice", "choices": {"yes": 1, "no": 0}}, "yesterday", None),  # a word boundary, not a prefix
        ({"type": "choice", "choices": {"A": 1, "B": 0}, "ignore_case": False}, "a", None),
        ({"type": "number"}, " 4.5/5", 4.5),
        ({"type": "number", "min": 1, "max": 5}, " 10", None),
        ({"type": "number", "min": 1, "max": 5}, "-2", None),
        ({"type": "number"}, "no idea", None),
    ],
)
def test_parser_cases(parser: dict[str, Any], text: str, score: float | None) -> None:
    assert parse(parser, text) == score


@pytest.mark.parametrize(
    "parser, message",
    [
        ({"type": "regex"}, "pattern: give the regular expression"),
        ({"type": "regex", "pattern": "x", "flags": 1}, "unknown option 'flags'"),
        ({"type": "choice", "choices": {}}, "non-empty mapping"),
        ({"type": "choice", "choices": {"A": "high"}}, "non-empty mapping"),
        # YAML's `map: {yes: 1, no: 0}` has boolean keys: a paragraph saying to quote them, not a traceback
        ({"type": "regex", "pattern": "(yes|no)", "map": {True: 1, False: 0}}, "Quote each answer"),
        ({"type": "choice", "choices": {1: 1.0}}, "Quote each answer"),
        ({"type": "number", "max": "five"}, "max: give a number"),
        ({"pattern": "x"}, "give a mapping with a type"),
    ],
)
def test_bad_parser_options_name_the_key(parser: dict[str, Any], message: str) -> None:
    with pytest.raises(TaskError, match=message) as caught:
        parse(parser, "")
    assert "t.yaml (judge metric 'm'): judge.parser" in str(caught.value)


def test_prompt_file_is_read_next_to_the_task_yaml(tmp_path: Any) -> None:
    (tmp_path / "rubric.j2").write_text("Grade {{ response }}")
    spec = parse_judge(
        "m",
        {"model": "dummy", "prompt_file": "rubric.j2", "parser": {"type": "number"}},
        "where",
        source=str(tmp_path / "task.yaml"),
    )
    assert spec.prompt == "Grade {{ response }}"
    with pytest.raises(TaskError, match="exactly one of prompt"):
        parse_judge("m", {"prompt": "x", "prompt_file": "rubric.j2", "parser": {"type": "number"}}, "where")
