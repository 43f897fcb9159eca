"""``evalflow.lm_eval`` mirrors lm-eval 0.4.13's Python modules name for name: each function takes
lm-eval's parameters, in its order, with its defaults (read from the installed lm-eval), so a script
that changes only its imports calls them as it called lm-eval's."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import pytest

import evalflow.lm_eval as mirror
from evalflow.lm_eval import evaluator, tasks

pytest.importorskip("lm_eval.evaluator")

MIRRORED = {  # lm-eval's module: (its names the mirror has, the mirror's module)
    "lm_eval": (("simple_evaluate", "evaluate"), mirror),
    "lm_eval.evaluator": (("simple_evaluate", "evaluate"), evaluator),
    "lm_eval.tasks": (("TaskManager", "get_task_dict"), tasks),
}


def parameters(obj: Any) -> list[inspect.Parameter]:
    """A function's parameters (past lm-eval's ``positional_deprecated`` wrapper), a class's ``__init__``'s."""
    target = obj.__init__ if inspect.isclass(obj) else inspect.unwrap(obj)
    return [p for p in inspect.signature(target).parameters.values() if p.name != "self"]


@pytest.mark.parametrize("module", sorted(MIRRORED))
def test_each_mirrored_name_takes_lm_evals_parameters_with_its_defaults(module: str) -> None:
    names, ours = MIRRORED[module]
    theirs = importlib.import_module(module)
    for name in names:
        expected = [(p.name, p.default) for p in parameters(getattr(theirs, name))]
        got = parameters(getattr(ours, name))
        assert [(p.name, p.default) for p in got[: len(expected)]] == expected, f"{module}.{name}"
        assert all(p.kind is p.KEYWORD_ONLY for p in got[len(expected) :]), (
            f"{module}.{name}: evalflow's own are keyword-only"
        )
