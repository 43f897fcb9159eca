"""lm-eval 0.4.13's own output folders (results_*.json, samples_*.jsonl), stored under
tests/insight/fixtures, which rescore and the judge stages read back."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.paths import ROOT

LM_EVAL_FOLDERS = ROOT / "tests" / "insight" / "fixtures"


def lm_eval_files(folder: Path, task: str) -> tuple[dict, Path]:
    """``task``'s results.json (read) and samples file (its path) in lm-eval's output ``folder``."""
    (results_file,) = folder.rglob("results_*.json")
    (samples,) = folder.rglob(f"samples_{task}_*.jsonl")
    return json.loads(results_file.read_text()), samples
