"""``python -m evalflow report RUN... [out=report.html] [docs=N]``: one self-contained HTML page of runs.

The page holds one results table per group, the runs side by side, each named by every setting
that varies between them; with two runs that pair, each row also gives B − A, its 95% interval
and p from ``compare``, a row with p < 0.05 is marked, and a group's subtasks are folded under it.
Then a bar chart of every metric with its stderr across runs, a line chart along a setting a
sweep varies (one line per combination of the other varying settings; give the multirun folder,
or several runs), the paired differences, and each task's documents: prompt, answers, filtered
answer and scores per run, decoded from a compressed blob only when the task is opened, and
narrowed by a checkbox to the documents the runs disagree on. What the page leaves out (a task
some runs lack, documents past ``docs=N``) it says where it leaves it out. Charts are Vega-Lite
specs built with altair; the Vega libraries are inlined from vl-convert's bundle, so the file
opens with no network::

    python -m evalflow report outputs/multirun/2026-11-30/12-00-00 out=sweep.html
    python -m evalflow report outputs/run_a peer-out/ out=a_vs_b.html docs=500

Needs the ``insight`` extra: ``pip install "evalflow[insight]"``.
"""

from __future__ import annotations

from pathlib import Path

from evalflow.commands.reference import print_help
from evalflow.commands.words import Command, Option, asks_for_help, parse_words
from evalflow.insight.report_build import build_report


def _max_docs(value: str) -> int | None:
    """a whole number of documents embedded per task (0: none) or all (the default)"""
    if value == "all":
        return None
    if value.isdigit():
        return int(value)
    raise ValueError(value)


COMMAND = Command(
    "report",
    "one self-contained HTML page of runs",
    "RUN...",
    1,
    options=(
        Option("out", str, "report.html", "the page's file"),
        Option("docs", _max_docs, None, "documents embedded per task (default: all)"),
    ),
    doc=__doc__ or "",
)


def main(argv: list[str]) -> int:
    """``report RUN... [out=report.html] [docs=N|all]``."""
    if not argv or asks_for_help(argv):
        print_help(COMMAND)
        return 0 if argv else 2
    words = parse_words(argv, COMMAND)
    out = Path(words.value("out"))
    html = build_report([Path(a) for a in words.positional], words.options.get("docs"))
    from evalflow.output.run_folder import atomic_write

    atomic_write(out, [html])
    print(f"report: {out} ({len(html) // 1024} KiB)")
    return 0
