"""The judges package: its docstring examples run, and its one parser registry refuses a silent
overwrite of a taken name (a user parser cannot change what ``type: regex`` means everywhere)."""

from __future__ import annotations

import doctest
import importlib

import pytest

import evalflow
from evalflow.errors import TaskError
from evalflow.judges.parsers import JUDGE_PARSERS, register_judge_parser


@pytest.mark.parametrize("name", ["parsers", "verdicts"])
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(f"evalflow.judges.{name}"))
    assert result.attempted > 0 and result.failed == 0


def test_a_taken_parser_name_is_refused_and_the_builtin_kept() -> None:
    builtin = JUDGE_PARSERS.get("regex")

    def mine(options: object, where: str) -> object:
        return lambda text: 1.0

    with pytest.raises(TaskError, match="'regex' is already registered"):
        register_judge_parser("regex")(mine)
    assert JUDGE_PARSERS.get("regex") is builtin
    assert evalflow.register_judge_parser is register_judge_parser  # the top-level name is this registry's
