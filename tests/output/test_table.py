"""The printed results: groups in their own table with indented subtasks (lm-eval's layout); a
redirected stdout holds the markdown table with full task names and no log lines."""

from __future__ import annotations

import io
from pathlib import Path

from evalflow.output.table import markdown_table, print_results
from tests.support.cli import base_args, cli
from tests.support.runs import Runner

LONG = "toy_mc_with_a_task_name_long_enough_to_be_cut_by_an_eighty_column_table_if_anything_cut_it"


def _group_library(toy_library: Path) -> None:
    mc = (toy_library / "toy_mc.yaml").read_text()
    (toy_library / f"{LONG}.yaml").write_text(mc.replace("task: toy_mc", f"task: {LONG}"))
    (toy_library / "toy_group.yaml").write_text(
        f"group: toy_group\ntask:\n  - toy_mc\n  - {LONG}\naggregate_metric_list:\n  - metric: acc\n"
        "metadata:\n  version: 1\n"
    )


def test_groups_table_with_indented_subtasks(runner: Runner, toy_library: Path) -> None:
    _group_library(toy_library)
    results, _, _ = runner("toy_group", limit=4)
    out = io.StringIO()
    print_results(results, out)
    tasks, groups = out.getvalue().split("\n\n")
    lines = tasks.splitlines()
    assert lines[0].startswith("|Tasks ") and lines[2].startswith("|toy_group ")
    assert {lines[3].split("|")[1].strip(), lines[4].split("|")[1].strip()} == {"- toy_mc", f"- {LONG}"}
    assert lines[3].startswith("| - ")
    group_lines = groups.splitlines()
    assert group_lines[0].startswith("|Groups") and len(group_lines) == 3 and group_lines[2].startswith("|toy_group")


def test_redirected_stdout_is_the_markdown_table_alone(toy_library: Path, tmp_path: Path) -> None:
    _group_library(toy_library)
    args = base_args(toy_library, tmp_path / "cache")
    args[2] = "task=toy_group"
    done = cli(args + ["limit=4", f"hydra.run.dir={tmp_path / 'run'}"])  # stdout is a pipe, not a terminal
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("|Tasks") and f"| - {LONG}|" in done.stdout  # full name, never cut
    assert not any(line.startswith("[") for line in lines)  # no log lines
    assert "task toy_mc" in done.stderr  # they went to stderr
    assert all(line.startswith(("|", "cache: ", "run folder:")) or not line for line in lines)
    assert [line for line in lines if line.startswith("cache: ")] == [  # the summary's one cache line
        f"cache: 0 of 32 model answers read from the cache {tmp_path / 'cache'}, 32 computed"
    ]


def test_markdown_escapes_pipes_and_aligns() -> None:
    text = markdown_table(("Task", "Value"), [["a|b", "1.0"]], right=("Value",))
    assert text.splitlines() == ["|Task|Value|", "|----|----:|", "|a\\|b|  1.0|"]


def test_a_result_without_value_is_said_plainly() -> None:
    """A judge metric none of whose verdicts parsed: "no value" in the table, and one NO VALUE line."""
    import doctest

    from evalflow.output import table

    result = doctest.testmod(table)
    assert result.attempted >= 1 and result.failed == 0
    assert table.results_rows({"results": {"t": {"ok,none": None, "ok_stderr,none": "N/A"}}})[0][6] == "no value"
