"""``python -m evalflow explain RUN [RUN_B]``: why each computed stage of a run re-ran
(:func:`evalflow.insight.explanation.explain` finds the reasons in the runs' manifest.json)."""

from __future__ import annotations

from pathlib import Path

from evalflow.commands.reference import print_help
from evalflow.commands.words import Command, asks_for_help, parse_words
from evalflow.insight.explanation import explain
from evalflow.output.run_paths import MANIFEST

COMMAND = Command(
    "explain",
    "why each computed stage of a run re-ran",
    "RUN_FOLDER [RUN_FOLDER_B]",
    1,
    2,
    doc="Why each computed stage of the run (of RUN_FOLDER_B, against RUN_FOLDER) re-ran, read from the "
    f"runs' {MANIFEST}; a run all served from the cache says so.",
)


def main(argv: list[str]) -> int:
    """``explain RUN [RUN_B]``: prints one line per computed stage; exit 0."""
    if asks_for_help(argv):
        print_help(COMMAND)
        return 0
    folders = parse_words(argv, COMMAND).positional
    run, ref = (Path(folders[-1]), Path(folders[0]) if len(folders) == 2 else None)
    lines = explain(run, ref)
    print("\n".join(lines) if lines else f"{run}: every stage was served from the cache")
    return 0
