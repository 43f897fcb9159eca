"""Stage code identities remember what each file imports by the file's content hash: a memo that
can never serve an edited file's old imports."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalflow.cache import import_memo
from evalflow.cache.code import module_closure
from evalflow.cache.fingerprint import file_fingerprint


@pytest.fixture
def fresh_memo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(import_memo, "_memo", None)
    monkeypatch.setattr(import_memo, "_dirty", False)
    return tmp_path / "xdg" / "evalflow" / f"code-imports-v{import_memo.VERSION}.json"


def parses(path: Path, module: str) -> list[bytes]:
    """What ``remembered_imports`` parsed for ``path`` (an empty list: it was remembered)."""
    seen: list[bytes] = []
    import_memo.remembered_imports(
        str(path), file_fingerprint(path), module, False, lambda data: seen.append(data) or ("x",)
    )
    return seen


def test_remembered_by_content_across_processes(tmp_path: Path, fresh_memo: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("import os\n")
    assert parses(src, "pkg.m") == [b"import os\n"]
    import_memo.save()
    assert fresh_memo.is_file()
    import_memo._memo = None  # a new process: only the file remains
    assert parses(src, "pkg.m") == []
    src.write_text("import sys\n")  # an edit: another hash, parsed again
    assert parses(src, "pkg.m") == [b"import sys\n"]
    assert parses(src, "other.m") == [b"import sys\n"]  # relative imports depend on the module name


def test_a_damaged_memo_is_ignored(tmp_path: Path, fresh_memo: Path) -> None:
    fresh_memo.parent.mkdir(parents=True)
    fresh_memo.write_text("{not json")
    src = tmp_path / "m.py"
    src.write_text("import os\n")
    assert parses(src, "pkg.m") == [b"import os\n"]


def test_closure_same_with_memo(tmp_path: Path, fresh_memo: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("import json\n")
    first = module_closure("pkg.a", pkg)
    import_memo._memo = None
    assert module_closure("pkg.a", pkg) == first and set(first) == {"pkg.a", "pkg.b"}
