"""Task code runs from its source as it is now, never from a ``.pyc`` (issue 49): a timestamp ``.pyc``
stays valid after an edit that keeps the file's size within the same second, so the code from
before the edit ran under the new source's key. It showed only where Python writes bytecode (a
fresh machine; not one with ``PYTHONDONTWRITEBYTECODE``), and only when the edit fell in that second.
Here the ``.pyc`` of the first version is written and the edit put in its second, whatever the clock."""

from __future__ import annotations

import os
import py_compile
import sys
from pathlib import Path

import pytest

from evalflow.taskspec.format.installed import code_fingerprint
from evalflow.taskspec.format.spec import FunctionRef
from evalflow.taskspec.format.taskcode import resolve_function

SECOND = 1_700_000_000 * 10**9  # a whole second, in nanoseconds
# (utils.py, the sibling it imports or None): the file edited is the last one named
STYLES = {
    "module": ("def value():\n    return 1\n", None),
    "relative": ("from .helpers import VALUE\n\ndef value():\n    return VALUE\n", "VALUE = 1\n"),
    "absolute": ("import helpers\n\ndef value():\n    return helpers.VALUE\n", "VALUE = 1\n"),
}


def _with_stale_pyc(path: Path, text: str) -> None:
    """Write ``text`` at the start of :data:`SECOND` with its ``.pyc`` (as an import writes one),
    then edit one character, half a second later: the ``.pyc`` still matches size and second."""
    path.write_text(text)
    os.utime(path, ns=(SECOND, SECOND))
    py_compile.compile(str(path), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    path.write_text(text.replace("1", "2"))
    os.utime(path, ns=(SECOND, SECOND + 5 * 10**8))


@pytest.mark.parametrize("style", sorted(STYLES))
def test_an_edit_within_the_second_of_its_pyc_runs_the_new_code(
    style: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    utils_text, helper_text = STYLES[style]
    utils, helpers = tmp_path / "utils.py", tmp_path / "helpers.py"
    if helper_text is None:
        _with_stale_pyc(utils, utils_text)
    else:
        utils.write_text(utils_text)
        _with_stale_pyc(helpers, helper_text)
    if style == "absolute":  # `import helpers` finds the sibling when run from the task folder
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.delitem(sys.modules, "helpers", raising=False)
    try:
        value = resolve_function(FunctionRef(str(utils), "value", code_fingerprint(str(utils))))
        assert value() == 2
    finally:
        sys.modules.pop("helpers", None)  # this folder's; another test's `import helpers` finds its own


def test_a_module_of_imports_given_by_path_runs_its_new_code(tmp_path: Path) -> None:
    """``imports=[path/to/mod.py]`` registers components keyed by the module's source: the same rule."""
    from evalflow.run.user_modules import import_user_modules

    path = tmp_path / "mine.py"
    _with_stale_pyc(path, "VALUE = 1\n")
    try:
        (module,) = import_user_modules([str(path)])
        assert module.VALUE == 2
    finally:
        sys.modules.pop("evalflow_user_mine", None)
