"""The usage examples in the sandbox modules' docstrings run and give the values they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["base", "current", "bubblewrap", "verdict"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(f"evalflow.sandbox.{name}")
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
