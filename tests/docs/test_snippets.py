"""The documentation's shell blocks: every one is runnable or says what it needs, and the runnable
ones run (tests/support/snippets.py has the rules; docs/contributing.md states them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import snippets
from tests.support.snippets import Block, PageFiles, check_command

BLOCKS = snippets.all_blocks()
MAX_FAST_LINES = 16  # each a run of a few seconds: the fast tier stays fast


def pages(*, slow: bool) -> list[str]:
    return sorted({b.page for b in BLOCKS if b.runnable and b.slow == slow})


def page_blocks(page: str) -> list[Block]:
    return [b for b in BLOCKS if b.page == page]


def test_every_shell_block_is_runnable_or_says_what_it_needs():
    assert snippets.marking_problems(BLOCKS) == []


def test_an_unmarked_block_and_an_unknown_need_are_reported():
    text = "```bash\npython -m evalflow\n```\n\n<!-- needs: gpus -->\n```bash\nnvidia-smi\n```\n"
    problems = snippets.marking_problems(snippets.blocks(text, "page.md"))
    assert len(problems) == 2 and "page.md:1" in problems[0] and "'gpus'" in problems[1]


def test_fast_runnable_lines_are_few_and_present():
    lines = [line for b in BLOCKS if b.runnable and not b.slow for line in b.commands()]
    assert 1 <= len(lines) <= MAX_FAST_LINES, lines


@pytest.mark.parametrize("page", pages(slow=False))
def test_runnable_lines_exit_0(page: str, tmp_path: Path) -> None:
    snippets.run_page(page_blocks(page), tmp_path, slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("page", pages(slow=True))
def test_slow_runnable_lines_exit_0(page: str, tmp_path: Path) -> None:
    snippets.run_page(page_blocks(page), tmp_path, slow=True)


def test_a_runnable_line_that_needs_more_is_refused():
    none = PageFiles({})
    with pytest.raises(AssertionError, match="model=dummy"):
        check_command("python -m evalflow model=smollm2 task=arith_mc limit=5", none)
    check_command("python -m evalflow model=smollm2 task=arith_mc limit=5", none, slow=True)
    with pytest.raises(AssertionError, match="task whose data ships"):
        check_command("python -m evalflow model=dummy task=arc_easy limit=5 data_map=shared", none)
    with pytest.raises(AssertionError, match="small limit"):
        check_command("python -m evalflow model=dummy task=arith_mc", none)
    with pytest.raises(AssertionError, match="read only what the page wrote"):
        check_command("cat /etc/passwd", none)


def test_a_page_may_run_the_task_and_model_class_it_writes():
    page = PageFiles({"lib/mine.yaml": "task: mine\n", "calc.py": "class Calc: ...\n"})
    check_command("python -m evalflow model.type=calc:Calc task=mine include_path=lib limit=5", page)
    with pytest.raises(AssertionError, match="model.type= a class the page writes"):
        check_command("python -m evalflow model.type=other:Calc task=mine limit=5", page)
