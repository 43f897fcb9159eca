"""``python -m evalflow explain RUN [RUN_B]``: why each computed stage of a run re-ran
(:func:`evalflow.insight.explanation.explain` finds the reasons in the runs' manifest.json)."""

from __future__ import annotations

from pathlib import Path

from evalflow.commands.words import Usage, asks_for_help, parse_words, print_help
from evalflow.insight.explanation import explain


def main(argv: list[str]) -> int:
    """``explain RUN [RUN_B]``: prints one line per computed stage; exit 0."""
    if asks_for_help(argv):
        print_help(
            "usage: python -m evalflow explain RUN_FOLDER [RUN_FOLDER_B]\n"
            "  why each computed stage of the run (of RUN_FOLDER_B, against RUN_FOLDER) re-ran"
        )
        return 0
    folders = parse_words(
        argv, Usage("explain", "RUN_FOLDER [RUN_FOLDER_B]", min_positional=1, max_positional=2)
    ).positional
    run, ref = (Path(folders[-1]), Path(folders[0]) if len(folders) == 2 else None)
    lines = explain(run, ref)
    print("\n".join(lines) if lines else f"{run}: every stage was served from the cache")
    return 0
