"""lm-eval's ``--tasks`` glob patterns (``TaskManager.match_tasks``: fnmatch over every task, group
and tag name; YAML path patterns over the files) expanded by the front door as lm-eval expands them."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalflow.errors import ConfigError
from evalflow.lmeval_compat.parser import parse
from evalflow.lmeval_compat.task_settings import LIBRARY, matched_tasks
from evalflow.lmeval_compat.translate import translate
from evalflow.taskspec.catalog.index import TaskIndex


def test_a_name_pattern_matches_as_lm_evals_pattern_match(toy_library: Path) -> None:
    utils = pytest.importorskip("lm_eval.utils")
    names = TaskIndex.build([str(toy_library)], library=[LIBRARY]).names()
    for pattern in ("toy_*", "arc_*", "*_mc", "mmlu_high_school_[bc]*"):
        expected = utils.pattern_match([pattern], names)
        assert expected and matched_tasks([pattern], str(toy_library)) == tuple(expected), pattern
    tr = translate(parse(["--model", "dummy", "--include_path", str(toy_library), "--tasks", "toy_mc,toy_*"]))
    assert tr.tasks == ("toy_mc", "toy_gen")  # in the order given, each once


def test_a_yaml_pattern_matches_the_files_and_a_pattern_matching_nothing_is_refused(toy_library: Path) -> None:
    pattern = str(toy_library / "toy_*.yaml")
    assert matched_tasks([pattern], None) == tuple(sorted(str(p) for p in toy_library.glob("toy_*.yaml")))
    assert matched_tasks(["arc_easy"], None) == ("arc_easy",)  # a plain name: no index built, as it is
    with pytest.raises(ConfigError, match="--tasks zz_nothing_\\*: no task, group or tag name matches"):
        translate(parse(["--model", "dummy", "--tasks", "zz_nothing_*"]))
