"""YAML alias expansion bombs in a task folder are refused with a clear error, not expanded."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalflow.errors import TaskError
from evalflow.taskspec.catalog.index import TaskIndex
from evalflow.taskspec.format.loader import load_yaml

BOMB = "task: bomb\nl0: &l0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9)
)  # 9**9 (387 million) strings once expanded


def test_an_alias_bomb_is_refused_by_the_loader_and_skipped_by_the_index(tmp_path: Path) -> None:
    (tmp_path / "bomb.yaml").write_text(BOMB)
    with pytest.raises(TaskError, match=r"bomb\.yaml: expanding its YAML aliases .* more than 100,000"):
        load_yaml(tmp_path / "bomb.yaml")
    index = TaskIndex.build([str(tmp_path)])
    assert any("bomb.yaml" in f and "alias" in why for f, why in index.problems)


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    (tmp_path / "loop.yaml").write_text("task: loop\nmetadata: &m {inner: *m}\n")
    with pytest.raises(TaskError, match=r"loop\.yaml, line 2: .*recursive"):
        load_yaml(tmp_path / "loop.yaml")


def test_ordinary_aliases_still_load(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(
        "task: ok\nmetric_list: &m [{metric: acc}]\nmetadata: {same: *m, wide: [" + ", ".join(["*m"] * 500) + "]}\n"
    )
    cfg = load_yaml(tmp_path / "ok.yaml")
    assert cfg["metadata"]["same"] == [{"metric": "acc"}] and len(cfg["metadata"]["wide"]) == 500
