"""The usage examples in the scoring modules' docstrings run and give the values they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "aggregations",
    "filters",
    "filters_tagging",
    "groups",
    "metrics",
    "process",
    "task_aggregation",
    "components",
    "code_exec",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(f"evalflow.scoring.{name}")
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
