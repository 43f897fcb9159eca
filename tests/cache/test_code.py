"""code_hash: an edit to a component or to anything in its module changes its hash; code without a
file is hashed by what is loaded, the same in every process, never by id()."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from evalflow.cache.code import code_hash
from tests.support.paths import ROOT

MODULE = """\
SCALE = 2


def helper(x):
    return x + 1


def metric(references, predictions):
    return SCALE * helper(len(predictions[0]))


class Upper:
    def apply(self, resps, docs):
        return [[r.upper() for r in inst] for inst in resps]
"""


def load(path: Path, text: str | None = None) -> ModuleType:
    """``text`` written to ``path`` and imported under a fresh name (a new process's import)."""
    if text is not None:
        path.write_text(text)
    load.n = getattr(load, "n", 0) + 1  # type: ignore[attr-defined]
    spec = importlib.util.spec_from_file_location(f"_code_test_{load.n}", path)  # type: ignore[attr-defined]
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_an_edit_anywhere_in_the_module_changes_its_components(tmp_path: Path) -> None:
    first, same = load(tmp_path / "user.py", MODULE), load(tmp_path / "moved.py", MODULE)
    assert code_hash(first.metric) == code_hash(same.metric)  # by content, not by path or module name
    assert code_hash(first.Upper) == code_hash(same.Upper)
    for i, edit in enumerate((("SCALE = 2", "SCALE = 3"), ("x + 1", "x + 2"), ("r.upper()", "r.lower()"))):
        edited = load(tmp_path / f"user{i}.py", MODULE.replace(*edit))
        assert code_hash(edited.metric) != code_hash(first.metric), edit
        assert code_hash(edited.Upper) != code_hash(first.Upper), edit


def test_a_module_edited_after_import_is_hashed_by_its_loaded_code(tmp_path: Path) -> None:
    """The old code keeps running until a re-import, so the new file's hash must not describe it."""
    path = tmp_path / "user.py"
    stale = load(path, MODULE)
    path.write_text(MODULE.replace("x + 1", "x + 10"))  # another size: Python's .pyc check sees it
    fresh = load(path)
    assert stale.metric(None, ["ab"]) != fresh.metric(None, ["ab"])
    assert code_hash(stale.metric) != code_hash(fresh.metric)


def hash_without_a_file(source: str, seed: str) -> str:
    """The hash ``python -c`` prints for ``metric`` defined in its ``__main__``."""
    script = source + "\nfrom evalflow.cache.code import code_hash\nprint(code_hash(metric), code_hash(Upper))\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": seed}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_code_without_a_file_is_hashed_by_its_code_the_same_in_every_process() -> None:
    base = hash_without_a_file(MODULE, "1")
    assert hash_without_a_file(MODULE, "2") == base  # no id(), no hash-seed order
    for edit in (("SCALE = 2", "SCALE = 3"), ("x + 1", "x + 2")):  # the function's helper and constant
        assert hash_without_a_file(MODULE.replace(*edit), "1").split()[0] != base.split()[0], edit
    assert hash_without_a_file(MODULE.replace("r.upper()", "r.lower()"), "1").split()[1] != base.split()[1]


def test_docstring_example() -> None:
    import doctest

    import evalflow.cache.code

    result = doctest.testmod(evalflow.cache.code)
    assert result.attempted > 0 and result.failed == 0
