"""``/api/results?ids=A,B[,C...]``: the runs' results side by side, one table per group.

This is what ``evalflow report`` used to render in a page of its own and now hands to the viewer:
each run named by every setting that varies between the runs (``num_fewshot=1 model.salt=x``),
one table per group (its own rows and its member groups'; its leaf subtasks folded under it),
tasks outside every group in a table of their own; with exactly two runs also ``compare``'s
paired columns (B − A, 95% interval, p, test, documents), a row with p below
:data:`~evalflow.insight.report_tables.SIGNIFICANT` marked. The tables come from
:func:`evalflow.insight.report_tables.result_sections`; app.js draws them for the server, the
bundle and the single-file report alike.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from evalflow.errors import RunFolderError
from evalflow.insight.comparison import Comparison, compare
from evalflow.insight.gate_sequence import gate_lines
from evalflow.insight.report_tables import SIGNIFICANT, left_out_notes, paired_columns, result_sections
from evalflow.insight.run_names import run_labels, varying_settings
from evalflow.output.partial import partial_line
from evalflow.output.run_folder import Run


def side_by_side(ids: list[str], runs: list[Run]) -> dict[str, Any]:
    """The payload for these runs (``ids`` their catalog ids, in the order shown)."""
    varying = varying_settings(runs)
    labels = run_labels(runs, varying)
    comparison: list[Comparison] = []
    compare_error = None
    if len(runs) == 2:
        try:
            comparison = compare(runs[0], runs[1])
        except RunFolderError as exc:
            compare_error = str(exc)
    sections = result_sections(runs, labels, comparison)
    return {
        "runs": [
            {
                "id": i,
                "label": label,
                "folder": str(r.folder),
                "kind": r.kind,
                "partial": partial_line(r.results),  # a partial (gate) run never reads as a complete one
                "gate": gate_lines(r.folder),
            }
            for i, label, r in zip(ids, labels, runs)
        ],
        "varying": {k: [str(v) for v in values] for k, values in varying.items()},
        "paired_columns": list(paired_columns(comparison)),
        "significant": SIGNIFICANT,
        "compare_error": compare_error,
        "notes": left_out_notes(runs, labels),
        "sections": [
            {"title": s.title, "head": [asdict(line) for line in s.head], "folded": [asdict(line) for line in s.folded]}
            for s in sections
        ],
    }
