"""lm-eval 0.4.13's ``ls`` and ``validate`` (and a bare ``run``) under ``python -m evalflow lm-eval``:
``ls`` prints lm-eval's Markdown tables from the front door's task index, ``validate`` lm-eval's
lines around ``python -m evalflow validate``. The peer check runs ``lm_eval ls`` and ``lm_eval
validate`` (the peer venv's console script) on the same folder and compares their output."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from evalflow.commands.lm_eval import main
from evalflow.taskspec.catalog.index import TaskIndex
from evalflow.taskspec.catalog.listing import lm_eval_tables
from tests.support.parity_harness import PEER_VENV
from tests.support.parity_harness import missing as peer_missing

GROUP = "group: home_group\ntask: [home_task]\naggregate_metric_list:\n  - metric: acc\n"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A task folder: one task (tagged, its prompt from utils.py) and a group of it."""
    tasks = tmp_path / "home"
    tasks.mkdir()
    data = tasks / "data.jsonl"
    data.write_text("".join(json.dumps({"q": f"is {i} odd", "label": i % 2}) + "\n" for i in range(3)))
    (tasks / "home_task.yaml").write_text(
        f"task: home_task\ntag: home_tag\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\n"
        "test_split: test\noutput_type: multiple_choice\ndoc_to_text: !function utils.doc_to_text\n"
        'doc_to_target: label\ndoc_to_choice: ["no", "yes"]\nmetric_list:\n  - metric: acc\n'
    )
    (tasks / "home_group.yaml").write_text(GROUP)
    (tasks / "utils.py").write_text('def doc_to_text(doc):\n    return "Q: " + doc["q"] + "\\nA:"\n')
    return tasks


def _ours(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVALFLOW_CACHE", str(tmp_path / "cache"))
    code = main(argv)
    return code, capsys.readouterr().out


def test_ls_prints_lm_evals_tables(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _ours(["ls", "tags", "--include_path", str(folder)], tmp_path, monkeypatch, capsys)
    lines = out.splitlines()
    width = len(lines[2]) - 2
    assert code == 0 and lines[0] == "" and lines[1].strip("|").strip() == "Tag" and len(lines[1]) == width + 2
    assert lines[2] == "|" + "-" * width + "|" and f"|{'home_tag'.ljust(width)}|" in lines
    code, out = _ours(["ls", "subtasks", "--include_path", str(folder)], tmp_path, monkeypatch, capsys)
    row = next(line for line in out.splitlines() if line.startswith("|home_task "))
    assert [cell.strip() for cell in row.strip("|").split("|")] == [
        "home_task",
        str(folder / "home_task.yaml"),
        "multiple_choice",
    ]
    assert "home_group" not in out  # subtasks only


def test_markdown_layout_is_pytablewriters() -> None:
    """Headers centred with the extra space on the right, cells left-aligned, as pytablewriter's
    MarkdownTableWriter writes them (its output for these rows, kept here)."""
    rows = {
        "abcdefg": ("/r", ["abcdefg", "tag", "", None, False, []]),
        "abcdefg_": ("/r", ["abcdefg_", "task", "x.yaml", None, True, []]),
    }
    index = TaskIndex(rows, roots=["/r"])
    assert lm_eval_tables(index, groups=False, subtasks=False) == "\n|  Tag  |\n|-------|\n|abcdefg|\n\n\n"
    assert lm_eval_tables(index, groups=False, tags=False) == (
        "\n|  Task  |Config Location|Output Type|\n|--------|---------------|-----------|\n"
        "|abcdefg_|/r/x.yaml      |           |\n\n\n"
    )


def test_ls_without_what_prints_its_help(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _ours(["ls"], tmp_path, monkeypatch, capsys)
    assert code == 0 and "{tasks,groups,subtasks,tags}" in out


def test_validate_says_what_lm_eval_says(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _ours(
        ["validate", "--tasks", "home_task,nowhere", "--include_path", str(folder)], tmp_path, monkeypatch, capsys
    )
    assert code == 1 and out.splitlines() == ["Validating tasks: ['home_task', 'nowhere']", "Tasks not found: nowhere"]
    code, out = _ours(
        ["validate", "--tasks", "home_group", "--include_path", str(folder)], tmp_path, monkeypatch, capsys
    )
    lines = out.splitlines()
    assert code == 0 and lines[0] == "Validating tasks: ['home_group']" and lines[-1] == "All tasks found and valid"
    assert any(line.startswith("ok  home_task:") for line in lines)  # evalflow's own check, documents rendered


def test_a_bare_run_prints_runs_help(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _ours(["run"], tmp_path, monkeypatch, capsys)
    assert code == 0 and "--tasks" in out and "--include_path" in out


@pytest.mark.slow
@pytest.mark.skipif(peer_missing() is not None, reason=str(peer_missing()))
def test_ls_and_validate_against_lm_eval(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """lm-eval's ``ls groups``, ``ls tags`` and ``validate`` on the same folder: the folder's rows are
    lm-eval's, every name lm-eval lists is listed, the header is lm-eval's; validate's lines match."""
    lm_eval = str(PEER_VENV / "bin" / "lm_eval")

    def peer(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([lm_eval, *argv], capture_output=True, text=True, timeout=600, cwd=tmp_path)

    for what, name in (("groups", "home_group"), ("tags", "home_tag")):
        theirs = peer("ls", what, "--include_path", str(folder)).stdout.splitlines()
        code, out = _ours(["ls", what, "--include_path", str(folder)], tmp_path, monkeypatch, capsys)
        ours = out.splitlines()
        assert code == 0 and ours[:1] == theirs[:1] == [""]

        def cells(lines: list[str]) -> dict[str, list[str]]:
            return {
                row[0]: row[1:]
                for row in ([c.strip() for c in line.strip("|").split("|")] for line in lines[3:] if line)
            }

        mine, lm = cells(ours), cells(theirs)
        assert mine[name] == lm[name] and set(lm) <= set(mine)
        assert [c.strip() for c in ours[1].strip("|").split("|")] == [
            c.strip() for c in theirs[1].strip("|").split("|")
        ]
    for tasks in ("home_task,nowhere", "home_task"):
        theirs = peer("validate", "--tasks", tasks, "--include_path", str(folder))
        code, out = _ours(["validate", "--tasks", tasks, "--include_path", str(folder)], tmp_path, monkeypatch, capsys)
        lm_lines = theirs.stdout.splitlines()
        ours = out.splitlines()
        assert code == theirs.returncode and [ours[0], ours[-1]] == [lm_lines[0], lm_lines[-1]]
