"""``python -m evalflow report RUN... [out=report.html] [docs=N]``: the viewer of these runs as ONE
self-contained HTML file, to attach to a review or mail to a colleague.

It is ``evalflow view``'s own front end and payloads folded into one page (no server, no network,
opens from ``file://``; :mod:`evalflow.view.single_file`): two runs open on their comparison
(``compare``'s paired rows, the documents that flipped, each pair of answers side by side), more
runs on their results side by side (one table per group, the runs named by every setting that
varies between them, a group's subtasks folded under it), one run on its page; from there every
view of the viewer works: each run's metrics, config and manifest, its samples (filtered and
searched in the page), explain, the documents every run gets wrong. ``docs=N`` keeps the first N
documents of each task in full (the samples lists keep every row; a page says where documents were
left out)::

    python -m evalflow report outputs/multirun/2026-11-30/12-00-00 out=sweep.html
    python -m evalflow report outputs/run_a peer-out/ out=a_vs_b.html docs=500

The page's Content-Security-Policy lets only its own script and stylesheet run (by their sha256
hashes), so nothing a model wrote can execute in it. Needs the ``insight`` and ``view`` extras:
``pip install "evalflow[insight,view]"``.
"""

from __future__ import annotations

from pathlib import Path

from evalflow.commands.reference import print_help
from evalflow.commands.words import Command, Option, asks_for_help, parse_words
from evalflow.errors import ConfigError


def _max_docs(value: str) -> int | None:
    """a whole number of documents embedded per task (0: none) or all (the default)"""
    if value == "all":
        return None
    if value.isdigit():
        return int(value)
    raise ValueError(value)


COMMAND = Command(
    "report",
    "the viewer of runs as one self-contained HTML file",
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
    try:
        from evalflow.view.single_file import write_single_file
    except ImportError as exc:
        raise ConfigError(
            f'report needs the view and insight extras ({exc.name} is missing): pip install "evalflow[insight,view]"'
        ) from None

    size = write_single_file([Path(a) for a in words.positional], out, words.options.get("docs"))
    print(f"report: {out} ({size // 1024} KiB)")
    return 0
