"""``python -m evalflow ls``: JSON, plain and rich listings, argument errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalflow.commands.ls import main, parse_args

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    builtin, user = tmp_path / "builtin", tmp_path / "user"
    (builtin / "b").mkdir(parents=True)
    (user / "u").mkdir(parents=True)
    (builtin / "b" / "zeta.yaml").write_text("task: zeta\ntag: letters\ndataset_path: json\n")
    (user / "u" / "alpha.yaml").write_text("task: alpha\ntag: [letters, first]\ndataset_path: json\n")
    (user / "u" / "_grp.yaml").write_text("group: grp\ntask: [alpha]\n")
    (user / "u" / "_template.yaml").write_text("dataset_path: json\n")
    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("EVALFLOW_TASKS_DIR", str(builtin))
    return builtin, user


def test_json_lists_sorted_names(folders: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, user = folders
    assert main(["--json", f"include_path=[{user}]"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"tasks": ["alpha", "zeta"], "groups": ["grp"], "tags": ["first", "letters"]}
    assert main(["--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"tasks": ["zeta"], "groups": [], "tags": ["letters"]}
    assert main(["--json", "builtin=false", f"include_path={user}"]) == 0
    assert json.loads(capsys.readouterr().out)["tasks"] == ["alpha"]


def test_plain_columns_when_piped(folders: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, user = folders
    assert main([f"include_path={user}"]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        ["group", "grp", "user/u/_grp.yaml"],
        ["tag", "first", "1", "task"],
        ["tag", "letters", "2", "tasks"],
        ["task", "alpha", "user/u/alpha.yaml"],
        ["task", "zeta", "builtin/b/zeta.yaml"],
    ]


def test_rich_table_on_a_terminal(
    folders: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "1 tasks, 0 groups, 1 tags" in out and "zeta" in out and "letters" in out


def test_bad_arguments_exit_2(folders: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--jsn"]) == 2
    assert "unknown flag '--jsn' (did you mean '--json'?)" in capsys.readouterr().err
    assert main(["include_path=[/no/such/folder]"]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_invalid_files_are_noted_on_stderr(folders: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, user = folders
    (user / "u" / "broken.yaml").write_text("task: [\n")
    assert main(["--json", f"include_path={user}"]) == 0
    captured = capsys.readouterr()
    assert "alpha" in json.loads(captured.out)["tasks"]
    assert "1 YAML file(s) were skipped" in captured.err and "broken.yaml" in captured.err


def test_parse_args_accepts_hydra_style_lists() -> None:
    assert parse_args(["include_path=[a, 'b']", "include_path=c", "--json", "builtin=no"]) == (
        True,
        ["a", "b", "c"],
        False,
    )


def test_python_m_evalflow_ls(folders: tuple[Path, Path], tmp_path: Path) -> None:
    _, user = folders
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "evalflow", "ls", "--json", f"include_path=[{user}]"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["groups"] == ["grp"]


def test_long_listing_is_plain_even_on_a_terminal(
    folders: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr("evalflow.taskspec.catalog.listing.RICH_MAX_ROWS", 1)
    assert main([]) == 0
    assert capsys.readouterr().out.split() == ["tag", "letters", "1", "task", "task", "zeta", "builtin/b/zeta.yaml"]
