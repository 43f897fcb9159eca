"""The usage examples in evalflow's docstrings run and give the values they show: every module
whose source holds an example, found by reading the tree (a renamed or new module cannot be left
out, as a hand-kept list of module names would let it be)."""

from __future__ import annotations

import doctest
import importlib

import pytest

from tests.support.import_graph import PACKAGE, module_name

WITH_EXAMPLES = sorted(module_name(p) for p in PACKAGE.rglob("*.py") if ">>> " in p.read_text(encoding="utf-8"))


def test_the_examples_are_found() -> None:
    assert {"evalflow.scoring.metric_functions", "evalflow.sandbox.verdict"} <= set(WITH_EXAMPLES)


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
